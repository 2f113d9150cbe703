"""Reads of the pool, each scoped to its owner."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from pool.models import AgentPoolEntry

# A RUNNING entry not touched for this long belongs to a process that died mid-resume.
DEFAULT_STALE_CLAIM = timedelta(minutes=5)


def resumable_q(*, now: datetime, stale_after: timedelta = DEFAULT_STALE_CLAIM) -> Q:
    """Entries a process may claim: waiting (or abandoned mid-resume) and not expired."""
    return (Q(status__in=AgentPoolEntry.WAITING)
            | Q(status=AgentPoolEntry.Status.RUNNING, updated_at__lt=now - stale_after)) & Q(expires_at__gt=now)


def pending_for_conversation(*, owner_id: int, conversation_id: Any, now: datetime | None = None,
                             stale_after: timedelta = DEFAULT_STALE_CLAIM) -> list[AgentPoolEntry]:
    """The owner's paused agents of one conversation, oldest first: who gets the next message."""
    now = now or timezone.now()
    return list(AgentPoolEntry.objects.filter(resumable_q(now=now, stale_after=stale_after),
                                              owner_id=owner_id, conversation_id=conversation_id)
                .order_by("created_at"))


def pool_entry_list(*, owner_id: int) -> QuerySet[AgentPoolEntry]:
    return AgentPoolEntry.objects.filter(owner_id=owner_id).order_by("-created_at")


def active_count(*, owner_id: int, now: datetime | None = None) -> int:
    """Unexpired entries of the owner: what the per-tenant limit counts."""
    return AgentPoolEntry.objects.filter(owner_id=owner_id, expires_at__gt=now or timezone.now()).count()
