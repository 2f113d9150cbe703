"""The pool admin: filters, owner scoping for non-superusers, cancel / expire actions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from orchestrator.models import Conversation
from pool.models import AgentPoolEntry
from pool.services import pool_entries_expire
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def _entry(owner: Any, agent_type: str) -> AgentPoolEntry:
    conversation = Conversation.objects.create(owner=owner, title="chat")
    now = timezone.now()
    return AgentPoolEntry.objects.create(owner=owner, conversation=conversation, agent_type=agent_type,
                                         status="waiting_for_input", agent_status="waiting_for_input",
                                         schema_version="v", updated_at=now, expires_at=now + timedelta(hours=1))


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_staff_see_only_their_own_entries_and_can_cancel_them() -> None:
    staff = make_user(is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_agentpoolentry",
                                                                         "delete_agentpoolentry"]))
    mine, theirs = _entry(staff, "ReminderAgent"), _entry(make_user(), "ContactCardAgent")
    client = _client(staff)
    page = client.get("/admin/pool/agentpoolentry/").content.decode()
    assert "ReminderAgent" in page and "ContactCardAgent" not in page
    client.post("/admin/pool/agentpoolentry/", {"action": "cancel_entries", "_selected_action": [mine.pk, theirs.pk]})
    assert not AgentPoolEntry.objects.filter(pk=mine.pk).exists()
    assert AgentPoolEntry.objects.filter(pk=theirs.pk).exists()  # not in their queryset: untouched


def test_superuser_filters_and_expires() -> None:
    admin_user = make_user(is_staff=True, is_superuser=True)
    entry = _entry(make_user(), "ReminderAgent")
    client = _client(admin_user)
    page = client.get("/admin/pool/agentpoolentry/?agent_type=ReminderAgent&status__exact=waiting_for_input")
    assert page.status_code == 200 and "ReminderAgent" in page.content.decode()
    client.post("/admin/pool/agentpoolentry/", {"action": "expire_entries", "_selected_action": [entry.pk]})
    entry.refresh_from_db()
    assert entry.expires_at <= timezone.now()
    assert pool_entries_expire() == 1
