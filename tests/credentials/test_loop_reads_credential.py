"""End to end: a tool in a ReAct run reads the user's stored credential through its context."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from credentials.services import credential_save
from orchestrator.models import Message, ToolInvocation
from orchestrator.tools import ToolExecutionContext, ToolRegistry, tool
from tests.credentials.conftest import SECRET, assert_no_secret
from tests.llm_server import text, tool_calls

pytestmark = pytest.mark.django_db(transaction=True)


def _tools(seen: list[Any]) -> ToolRegistry:
    tools = ToolRegistry()

    @tool(register_in=tools)
    async def check_inbox(context: ToolExecutionContext, account: str = "primary") -> str:
        """Count unread mail with the user's stored mail credentials.

        Args:
            account: Which connected mail account.
        """
        creds = await context.credentials.get(context.tenant_id, "imap", account)
        seen.append(creds)
        if creds is None:
            return "No mail account is connected; ask the user to connect one."
        return f"3 unread messages for {creds['username']}"

    return tools


async def test_tool_reads_its_users_credential_and_the_secret_stays_out_of_the_transcript(
        make_orchestrator: Any, llm_server: Any, user: Any, other_user: Any) -> None:
    await sync_to_async(credential_save)(owner_id=user.pk, service="imap", account_name="primary",
                                         credentials={"username": "me@example.org", "password": SECRET})
    seen: list[Any] = []
    llm_server.script(tool_calls(("check_inbox", {})), text("You have 3 unread messages."))
    outcome = await make_orchestrator(tools=_tools(seen)).handle_message(user_id=user.pk, content="any mail?")
    assert outcome.result.response == "You have 3 unread messages."
    assert seen == [{"username": "me@example.org", "password": SECRET}]
    tool_result = next(m for m in llm_server.requests[1].messages if m["role"] == "tool")
    assert tool_result["content"] == "3 unread messages for me@example.org"

    stored = await sync_to_async(lambda: " ".join(
        [m.content for m in Message.objects.all()] + [str(i.args_summary) for i in ToolInvocation.objects.all()]))()
    assert_no_secret(stored + str(outcome.as_dict()))

    # The other user runs the same tool and gets nothing of the first user's.
    llm_server.script(tool_calls(("check_inbox", {})), text("Please connect a mail account."))
    await make_orchestrator(tools=_tools(seen)).handle_message(user_id=other_user.pk, content="any mail?")
    assert seen[-1] is None
