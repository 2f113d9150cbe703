"""The admin shows runs, transcripts and tool statistics, owner-scoped for non-superusers."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from orchestrator.models import Conversation, LoopRun, LoopTurn, ToolInvocation
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def _run(owner: Any, *, response: str, tools: list[tuple[str, bool, int]]) -> LoopRun:
    conversation = Conversation.objects.create(owner=owner, title=f"{response} chat")
    run = LoopRun.objects.create(owner=owner, conversation=conversation, status="completed", response=response,
                                 turns=2)
    LoopTurn.objects.create(run=run, index=1, recovery_steps=["retry:rate_limit"])
    for i, (name, success, ms) in enumerate(tools):
        ToolInvocation.objects.create(run=run, owner=owner, turn_index=1, tool_call_id=f"c{i}", name=name,
                                      success=success, duration_ms=ms)
    return run


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_superuser_sees_runs_with_transcript_and_tool_stats() -> None:
    admin_user = make_user(is_staff=True, is_superuser=True)
    owner = make_user()
    run = _run(owner, response="weather answer", tools=[("get_weather", True, 100), ("get_weather", False, 300),
                                                         ("calculate", True, 10)])
    client = _client(admin_user)
    changelist = client.get("/admin/orchestrator/looprun/?status__exact=completed")
    assert changelist.status_code == 200 and str(run.id)[:8] in changelist.content.decode()
    detail = client.get(f"/admin/orchestrator/looprun/{run.id}/change/").content.decode()
    assert "retry:rate_limit" in detail and "get_weather" in detail
    stats = client.get("/admin/orchestrator/looprun/tool-stats/?days=7").content.decode()
    assert "get_weather" in stats and "50.0 %" in stats and "200" in stats  # 2 calls, 1 ok, mean 200 ms
    assert "calculate" in stats and "100.0 %" in stats


def test_staff_who_are_not_superusers_only_see_their_own_runs() -> None:
    staff = make_user(is_staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_looprun", "view_conversation"]))
    mine = _run(staff, response="mine", tools=[("calculate", True, 5)])
    theirs = _run(make_user(), response="theirs", tools=[("secret_tool", True, 5)])
    client = _client(staff)
    listing = client.get("/admin/orchestrator/looprun/").content.decode()
    assert str(mine.id)[:8] in listing and str(theirs.id)[:8] not in listing
    assert client.get(f"/admin/orchestrator/looprun/{theirs.id}/change/").status_code in (302, 404)
    assert client.get(f"/admin/orchestrator/conversation/{theirs.conversation_id}/change/").status_code in (302, 404)
    stats = client.get("/admin/orchestrator/looprun/tool-stats/").content.decode()
    assert "calculate" in stats and "secret_tool" not in stats
