"""Agents without the database: schemas, field collection, versions, snapshots, examples."""

from __future__ import annotations

import json
import zoneinfo
from datetime import datetime

import pytest

from orchestrator.agent_tools import APPROVAL_NOTE, AgentTool, wants_to_cancel
from orchestrator.agents import AgentStatus, InputField, StandardAgent, schema_version
from orchestrator.example_agents import ContactCardAgent, ReminderAgent, resolve_when
from tests.pool.conftest import build_agent_tools


@pytest.mark.smoke
def test_agent_tool_schemas_sit_beside_plain_tools() -> None:
    tools, agents = build_agent_tools()
    assert tools.names() == ["FlightSearchAgent", "SendEmailAgent", "TransferMoneyAgent", "get_weather"]
    assert "HousekeepingAgent" in agents.names()  # registered as an agent, not offered as a tool
    email = tools.get("SendEmailAgent").schema()["function"]
    assert email["description"] == "Send an email on the user's behalf."
    params = email["parameters"]
    assert params["required"] == []  # missing fields are asked for, not guessed
    assert params["properties"]["recipient"]["description"] == "Recipient email address (must contain @)"
    assert "(optional)" in params["properties"]["cc"]["description"]
    assert "Example:" in params["properties"]["task_instruction"]["description"]
    transfer = tools.get("TransferMoneyAgent").schema()["function"]
    assert transfer["description"].endswith(APPROVAL_NOTE)
    assert not email["description"].endswith(APPROVAL_NOTE)
    assert transfer["parameters"]["properties"]["amount"]["type"] == "integer"
    assert tools.get("SendEmailAgent").is_agent and not tools.get("get_weather").is_agent


@pytest.mark.smoke
def test_schema_version_is_computed_from_the_fields() -> None:
    first, _ = build_agent_tools()
    again, _ = build_agent_tools()
    changed, _ = build_agent_tools(recipient_required=False)
    version = first.get("SendEmailAgent").schema_version
    assert version == again.get("SendEmailAgent").schema_version  # stable across imports
    assert version != changed.get("SendEmailAgent").schema_version
    assert version != first.get("FlightSearchAgent").schema_version


def _email_agent() -> StandardAgent:
    tools, _ = build_agent_tools()
    tool = tools.get("SendEmailAgent")
    assert isinstance(tool, AgentTool)
    return tool.agent_cls()


async def test_extracted_fields_are_adopted_validated_defaulted_or_asked() -> None:
    agent = _email_agent()
    result = await agent.start({"recipient": "bob", "subject": "Hi", "body": "Hello", "task_instruction": "be nice"})
    assert result.status == AgentStatus.WAITING_FOR_INPUT
    assert "Invalid email: it must contain @" in result.message and "recipient" in result.message
    assert agent.fields == {"subject": "Hi", "body": "Hello"} and agent.task_instruction == "be nice"
    result = await agent.reply("still wrong")
    assert result.status == AgentStatus.WAITING_FOR_INPUT and "must contain @" in result.message
    result = await agent.reply("bob@example.com")
    assert result.status == AgentStatus.COMPLETED
    assert agent.fields["cc"] == "" and agent.state == {"sent": True}


async def test_several_missing_fields_take_field_value_lines() -> None:
    agent = _email_agent()
    result = await agent.start({"subject": "Trip"})
    assert result.status == AgentStatus.WAITING_FOR_INPUT
    assert "recipient" in result.message and "body" in result.message
    result = await agent.reply("Recipient: team@example.com\nbody: see you there")
    assert result.status == AgentStatus.COMPLETED
    assert agent.fields["recipient"] == "team@example.com" and agent.fields["body"] == "see you there"


async def test_wrong_type_is_refused_and_snapshot_roundtrips_as_json() -> None:
    tools, _ = build_agent_tools()
    agent = tools.get("TransferMoneyAgent").agent_cls()
    result = await agent.start({"payee": "Alice", "amount": "lots"})
    assert result.status == AgentStatus.WAITING_FOR_INPUT and "amount must be an integer" in result.message
    snapshot = json.loads(json.dumps(agent.snapshot()))
    restored = type(agent).restore(snapshot)
    result = await restored.reply("25")
    assert result.status == AgentStatus.WAITING_FOR_APPROVAL and "Transfer 25 EUR to Alice" in result.message
    restored = type(agent).restore(json.loads(json.dumps(restored.snapshot())))
    assert (await restored.reply("maybe later?")).status == AgentStatus.WAITING_FOR_APPROVAL
    assert (await restored.reply("yes please")).status == AgentStatus.COMPLETED


def test_old_snapshot_of_a_shipped_agent_still_restores() -> None:
    """A snapshot as stored by this version; changing ReminderAgent's fields must bump the version."""
    assert schema_version(ReminderAgent) == "10357a55a122744c"
    snapshot = {"fields": {"what": "call mum"}, "state": {}, "status": "waiting_for_input",
                "question": "What is the when?", "errors": {}, "task_instruction": ""}
    agent = ReminderAgent.restore(snapshot)
    assert agent.status == AgentStatus.WAITING_FOR_INPUT and [s.name for s in agent.to_ask()] == ["when"]


def test_state_that_is_not_json_is_refused() -> None:
    agent = _email_agent()
    agent.state["when"] = datetime(2026, 1, 1)
    with pytest.raises(TypeError, match="JSON"):
        agent.snapshot()


def test_input_field_checks_type_then_validator() -> None:
    field = InputField("email", str, validator=lambda v: None if "@" in v else "no @")
    assert field.check("a@b") == ("a@b", None)
    assert field.check("ab") == (None, "no @")
    assert field.check(5)[1] == "email must be a string, got int"


@pytest.mark.smoke
def test_resolve_when_reads_iso_and_clock_times_in_the_user_zone() -> None:
    tz = zoneinfo.ZoneInfo("Europe/Berlin")
    now = datetime(2026, 3, 10, 15, 0, tzinfo=tz)
    assert resolve_when("18:30", tz, now) == datetime(2026, 3, 10, 18, 30, tzinfo=tz)
    assert resolve_when("09:00", tz, now) == datetime(2026, 3, 11, 9, 0, tzinfo=tz)  # passed: tomorrow
    assert resolve_when("tomorrow 18:30", tz, now) == datetime(2026, 3, 11, 18, 30, tzinfo=tz)
    assert resolve_when("2026-05-01T09:30", tz, now) == datetime(2026, 5, 1, 9, 30, tzinfo=tz)
    assert resolve_when("2026-05-01T09:30+00:00", tz, now).utcoffset().total_seconds() == 0
    assert resolve_when("soonish", tz, now) is None and resolve_when("25:00", tz, now) is None


async def test_contact_card_agent_validates_each_field_and_builds_a_vcard() -> None:
    agent = ContactCardAgent()
    result = await agent.start({"full_name": "Ada Lovelace", "email": "ada", "phone": "call me"})
    assert result.status == AgentStatus.WAITING_FOR_INPUT
    assert "'ada' is not an email address" in result.message and "not a phone number" in result.message
    result = await agent.reply("email: ada@example.org\nphone: +44 20 1234 5678")
    assert result.status == AgentStatus.COMPLETED
    assert "FN:Ada Lovelace" in result.message and "TEL;TYPE=CELL:+442012345678" in result.message
    assert result.data["vcard"].startswith("BEGIN:VCARD")


def test_cancel_phrases() -> None:
    assert all(wants_to_cancel(t) for t in ("never mind", "Cancel that", "stop", "nevermind, what's up?"))
    assert not any(wants_to_cancel(t) for t in ("bob@example.com", "tomorrow 9:00", "stopwatch"))
