"""``manage.py chat``: the quickest way to try OneValet prints the run as it happens."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from orchestrator.models import Conversation, Message
from tests.llm_server import text, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)


def test_chat_streams_text_and_tool_activity(llm_server: Any, user: Any) -> None:
    llm_server.script(tool_calls(("calculate", {"expression": "6 * 7"})), text("Six times seven is 42."),
                      text("You asked me to multiply."))
    out = StringIO()
    call_command("chat", "--user", user.username, "-m", "what is 6*7?", "-m", "what did I ask?", stdout=out)
    printed = out.getvalue()
    assert "→ calculate(expression='6 * 7')" in printed
    assert "✓ calculate" in printed and "6 * 7 = 42" in printed
    assert "Six times seven is 42." in printed and "You asked me to multiply." in printed
    assert "[completed: 2 turn(s), 1 tool call(s)" in printed
    # Both messages went to one conversation, streamed.
    assert Conversation.objects.filter(owner=user).count() == 1
    assert Message.objects.filter(owner=user, role="user").count() == 2
    assert all(r.stream for r in llm_server.requests)


def test_chat_refuses_an_unknown_user(llm_server: Any) -> None:
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("chat", "--user", "nobody", "-m", "hi")
