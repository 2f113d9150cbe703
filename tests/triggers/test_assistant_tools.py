"""The assistant's scheduling tools, driven through a scripted LLM tool call."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest
import time_machine
from asgiref.sync import async_to_sync

from tests.llm_server import text, tool_calls
from triggers.assistant_tools import parse_when
from triggers.models import TriggerTask

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2030, 3, 30, 21, 0, tzinfo=dt_timezone.utc)  # 22:00 in Berlin, the eve of the DST change


def test_remind_me_in_two_minutes(berlin_user: Any, llm_server: Any, trigger_orchestrator: Any) -> None:
    llm_server.script(tool_calls(("create_reminder", {"text": "stretch", "when": "in 2 minutes"})),
                      text("Done — I'll remind you at 22:02."))
    with time_machine.travel(NOW, tick=False):
        outcome = async_to_sync(trigger_orchestrator.handle_message)(
            user_id=berlin_user.pk, content="remind me in 2 minutes to stretch")
    assert outcome.result.response.startswith("Done")
    task = TriggerTask.objects.get(owner=berlin_user)
    assert task.kind == "one_time" and task.executor == "notify" and task.timezone == "Europe/Berlin"
    assert task.run_at == NOW + timedelta(minutes=2)
    assert task.periodic_task.clocked.clocked_time == NOW + timedelta(minutes=2)
    tool_result = llm_server.requests[1].messages[-1]["content"]
    assert "today at 22:02 (Europe/Berlin)" in tool_result


def test_schedule_list_cancel(berlin_user: Any) -> None:
    from orchestrator.tools import ToolExecutionContext
    from triggers import assistant_tools

    ctx = ToolExecutionContext(tenant_id=berlin_user.pk, conversation_id="c", run_id="r", timezone="Europe/Berlin")
    said = assistant_tools.schedule_task.func(instruction="summarise mail", context=ctx, cron="0 8 * * *",
                                              name="Mail")
    assert "cron “0 8 * * *” (Europe/Berlin)" in said
    assert [t["name"] for t in assistant_tools.list_tasks.func(context=ctx)] == ["Mail"]
    assert "Cancelled" in assistant_tools.cancel_task.func(task="mail", context=ctx)
    assert not TriggerTask.objects.exists()


@pytest.mark.parametrize(("words", "local"), [
    ("in 2 minutes", "2030-03-30 22:02"),
    ("in an hour", "2030-03-30 23:00"),
    ("at 15:00", "2030-03-31 15:00"),          # passed today -> tomorrow
    ("at 23:30", "2030-03-30 23:30"),
    ("tomorrow 9:00", "2030-03-31 09:00"),
    ("tomorrow at 2:30", "2030-03-31 03:30"),  # inside the DST gap: the real instant after it
    ("tomorrow 9am", "2030-03-31 09:00"),
    ("2030-04-01T10:00", "2030-04-01 10:00"),
])
def test_parse_when_in_users_timezone(words: str, local: str) -> None:
    assert f"{parse_when(words, 'Europe/Berlin', now=NOW):%Y-%m-%d %H:%M}" == local
