"""Agents defined by the tests (spec section 7's flight + weather + email) and helpers."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.agents import AgentRegistry, AgentResult, InputField, StandardAgent, valet
from orchestrator.tools import ToolRegistry, tool
from orchestrator.loop import PHRASE_INSTRUCTION
from tests.llm_server import RecordedRequest, Step, tool_calls


def has_at(value: str) -> str | None:
    return None if "@" in value else "Invalid email: it must contain @"


def build_agent_tools(*, recipient_required: bool = True) -> tuple[ToolRegistry, AgentRegistry]:
    """Fresh classes in fresh registries on every call — like a new process importing them."""
    tools, agents = ToolRegistry(), AgentRegistry()

    @tool(register_in=tools)
    async def get_weather(city: str, date: str = "today") -> str:
        """Weather forecast for a city.

        Args:
            city: The city.
            date: The day.
        """
        return f"Sunny, 15C in {city} on {date}"

    @valet(agents=agents, tools=tools)
    class FlightSearchAgent(StandardAgent):
        """Search flights between two airports on a date."""

        input_fields = (InputField("origin", str, "Departure airport code"),
                        InputField("destination", str, "Arrival airport code"),
                        InputField("date", str, "Travel date"))

        async def on_running(self) -> AgentResult:
            f = self.fields
            return AgentResult.completed(f"3 flights {f['origin']}->{f['destination']} on {f['date']}: "
                                         "UA 100 08:00, DL 200 12:00, AA 300 18:00")

    @valet(agents=agents, tools=tools)
    class SendEmailAgent(StandardAgent):
        """Send an email on the user's behalf."""

        input_fields = (InputField("recipient", str, "Recipient email address", required=recipient_required,
                                   validator=has_at, validator_description="must contain @"),
                        InputField("subject", str, "Subject line"),
                        InputField("body", str, "The message"),
                        InputField("cc", str, "Copy to", required=False, default=""))

        async def on_running(self) -> AgentResult:
            self.state["sent"] = True
            return AgentResult.completed(f"Email sent to {self.fields['recipient']} "
                                         f"(subject: {self.fields['subject']}).")

    @valet(agents=agents, tools=tools)
    class TransferMoneyAgent(StandardAgent):
        """Transfer money to a saved payee."""

        input_fields = (InputField("payee", str, "Saved payee name"), InputField("amount", int, "Amount in euros"))

        def needs_approval(self) -> bool:
            return True

        def approval_summary(self) -> tuple[str, dict[str, Any]]:
            return f"Transfer {self.fields['amount']} EUR to {self.fields['payee']}", dict(self.fields)

        async def on_running(self) -> AgentResult:
            return AgentResult.completed(f"Transferred {self.fields['amount']} EUR to {self.fields['payee']}.")

    @valet(agents=agents, tools=tools, expose_as_tool=False)
    class HousekeepingAgent(StandardAgent):
        """Internal only: never offered to the LLM."""

        async def on_running(self) -> AgentResult:
            return AgentResult.completed("done")

    return tools, agents


def route(intent: str = "answer", **values: Any) -> Step:
    """The scripted answer of the reply-routing call a waiting agent's resume makes first."""
    arguments: dict[str, Any] = {"intent": intent}
    if values:
        arguments["values"] = values
    return tool_calls(("route_reply", arguments))


def assert_phrasing_request(request: RecordedRequest, question: str) -> None:
    """The extra call that words a waiting agent's question (issue 5): no tools, the raw question last."""
    assert request.tools is None
    instruction = request.last_message or {}
    assert instruction["content"] == PHRASE_INSTRUCTION.format(question=question), instruction["content"]


def assert_valid_tool_ordering(messages: list[dict[str, Any]]) -> None:
    """What the OpenAI API demands: each tool result answers a call of the assistant message
    right before its run of tool results, and every call gets exactly one result."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"orphan tool result {message['tool_call_id']}"
            open_calls.remove(message["tool_call_id"])
            continue
        assert not open_calls, f"calls without results before a {message['role']} message: {open_calls}"
        if message["role"] == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or ()}
    assert not open_calls, f"calls without results at the end: {open_calls}"


@pytest.fixture
def agent_tools() -> ToolRegistry:
    return build_agent_tools()[0]
