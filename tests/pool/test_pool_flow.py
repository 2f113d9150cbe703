"""Agent-tools through the whole orchestrator: scripted LLM server, real SDK, real database."""

from __future__ import annotations

import zoneinfo

import json
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from orchestrator.models import Message, ToolInvocation
from orchestrator.types import RunStatus
from pool import selectors, services
from pool.models import AgentPoolEntry
from pool.tasks import expire_pool_entries
from tests.llm_server import text, tool_calls
from tests.pool.conftest import assert_phrasing_request, assert_valid_tool_ordering, build_agent_tools, route

pytestmark = [pytest.mark.django_db(transaction=True)]

EMAIL_NO_RECIPIENT = {"subject": "NYC trip", "body": "Flights and weather attached"}
ASK_RECIPIENT = "What is the recipient (Recipient email address)?"
PHRASED_RECIPIENT = "Who should I send the email to?"


def _entries(**filters: Any) -> list[AgentPoolEntry]:
    return list(AgentPoolEntry.objects.filter(**filters))


entries = sync_to_async(_entries)


async def _park_email_agent(orchestrator: Any, llm_server: Any, user: Any, call_id: str = "call_mail",
                            conversation: Any = None) -> Any:
    """One message whose agent-tool call lacks the recipient: the agent waits in the pool."""
    llm_server.script(tool_calls((call_id, "SendEmailAgent", EMAIL_NO_RECIPIENT)), text(PHRASED_RECIPIENT))
    outcome = await orchestrator.handle_message(user_id=user.pk, content="email the team", conversation_id=conversation)
    assert outcome.result.status == RunStatus.WAITING_FOR_INPUT
    return outcome


async def test_flight_weather_email_scenario(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    """Spec section 7: two calls at once, then an agent that needs the user, then the wrap-up."""
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    llm_server.script(
        tool_calls(("call_flights", "FlightSearchAgent", {"origin": "SFO", "destination": "NYC", "date": "Friday"}),
                   ("call_weather", "get_weather", {"city": "NYC", "date": "Friday"})),
        tool_calls(("call_mail", "SendEmailAgent", EMAIL_NO_RECIPIENT)),
        text(PHRASED_RECIPIENT),
    )
    first = await orchestrator.handle_message(user_id=user.pk, content="Find flights SFO-NYC Friday, check the "
                                                                       "weather and email it to the team")
    result = first.result
    assert result.status == RunStatus.WAITING_FOR_INPUT and result.turns == 3  # 2 + the phrasing call
    assert_phrasing_request(llm_server.requests[2], ASK_RECIPIENT)
    assert result.response == PHRASED_RECIPIENT
    assert result.interruption.prompt == ASK_RECIPIENT
    assert [(r.name, r.turn, r.result_status) for r in result.tool_calls] == [
        ("FlightSearchAgent", 1, "COMPLETED"), ("get_weather", 1, None), ("SendEmailAgent", 2, "WAITING_FOR_INPUT")]
    [entry] = await entries(owner_id=user.pk)
    assert entry.agent_type == "SendEmailAgent" and entry.collected_fields == EMAIL_NO_RECIPIENT
    assert entry.tool_call_id == "call_mail" and str(entry.run_id) == first.run_id
    assert result.interruption.data["pool_entry"] == str(entry.id)

    llm_server.script(route(recipient="team@example.com"),
                      text("Done: flights found, NYC will be sunny, and the email went to team@example.com."))
    second = await orchestrator.handle_message(user_id=user.pk, content="team@example.com",
                                               conversation_id=first.conversation_id)
    assert second.result.status == RunStatus.COMPLETED
    assert second.result.response.startswith("Done: flights found")
    assert await entries(owner_id=user.pk) == []
    sent = llm_server.requests[-1].messages
    assert_valid_tool_ordering(sent)
    tool_results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert tool_results["call_flights"].startswith("3 flights SFO->NYC")
    assert tool_results["call_weather"] == "Sunny, 15C in NYC on Friday"
    assert tool_results[f"resume_{entry.id.hex}"] == "Email sent to team@example.com (subject: NYC trip)."
    assert [m["role"] for m in sent[-4:]] == ["assistant", "user", "assistant", "tool"]
    assert sent[-4]["content"] == PHRASED_RECIPIENT
    assert sent[-3] == {"role": "user", "content": "team@example.com"}
    resumed_call = sent[-2]["tool_calls"][0]
    assert resumed_call["function"]["name"] == "SendEmailAgent"
    assert json.loads(resumed_call["function"]["arguments"])["recipient"] == "team@example.com"
    # The next message's history (from the database) is still valid for the API.
    llm_server.script(text("You're welcome!"))
    await orchestrator.handle_message(user_id=user.pk, content="thanks", conversation_id=first.conversation_id)
    assert_valid_tool_ordering(llm_server.requests[-1].messages)
    completed = ToolInvocation.objects.filter(name="SendEmailAgent", result_status="COMPLETED")
    assert await sync_to_async(completed.count)() == 1


@pytest.mark.smoke
async def test_missing_field_is_asked_then_answered(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    from orchestrator.example_agents import ReminderAgent  # noqa: F401 - registers the shipped agents
    from orchestrator.tools import registry

    orchestrator = make_orchestrator(tools=registry.subset(["ReminderAgent"]))
    llm_server.script(tool_calls(("call_r", "ReminderAgent", {"what": "water the plants"})),
                      text("When shall I remind you?"))
    first = await orchestrator.handle_message(user_id=user.pk, content="remind me to water the plants")
    assert first.result.status == RunStatus.WAITING_FOR_INPUT and "when" in first.result.interruption.prompt
    assert_phrasing_request(llm_server.requests[-1], first.result.interruption.prompt)
    assert first.result.response == "When shall I remind you?"
    llm_server.script(route(when="tomorrow 08:15"), text("Done, I'll remind you."))
    second = await orchestrator.handle_message(user_id=user.pk, content="tomorrow 08:15",
                                               conversation_id=first.conversation_id)
    assert second.result.response == "Done, I'll remind you."
    result = [m for m in llm_server.requests[-1].messages if m["role"] == "tool"][-1]["content"]
    assert result.startswith("Reminder #") and "'water the plants'" in result and "08:15" in result
    # The reminder is a real one-time trigger task in the user's zone that notifies them.
    from triggers.models import TriggerTask

    task = await sync_to_async(TriggerTask.objects.get)(owner=user)
    assert task.kind == "one_time" and task.executor == "notify" and task.status == "active"
    assert task.action == {"message": "Reminder: water the plants", "title": "Reminder"}
    assert task.run_at.astimezone(zoneinfo.ZoneInfo(task.timezone)).strftime("%H:%M") == "08:15"


async def test_invalid_value_is_asked_again_with_the_validator_message(make_orchestrator: Any, llm_server: Any,
                                                                       user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    llm_server.script(tool_calls(("call_mail", "SendEmailAgent", {**EMAIL_NO_RECIPIENT, "recipient": "the team"})),
                      text("That address needs an @ - who should get it?"))
    first = await orchestrator.handle_message(user_id=user.pk, content="email the team")
    assert "Invalid email: it must contain @" in first.result.interruption.prompt
    assert_phrasing_request(llm_server.requests[1], first.result.interruption.prompt)
    assert first.result.response == "That address needs an @ - who should get it?"
    # An answer without values: the agent's own parser reads it; its next question is phrased too.
    llm_server.script(route(), text("Still no @ there - which address?"))
    second = await orchestrator.handle_message(user_id=user.pk, content="just the usual people",
                                               conversation_id=first.conversation_id)
    assert second.result.status == RunStatus.WAITING_FOR_INPUT and second.result.turns == 1
    assert "Invalid email: it must contain @" in second.result.interruption.prompt
    assert second.result.response == "Still no @ there - which address?"
    # The still-waiting agent answered without the loop: the requests since are routing and phrasing.
    assert len(llm_server.requests) == 4
    assert [t["function"]["name"] for t in llm_server.requests[2].tools] == ["route_reply"]
    assert_phrasing_request(llm_server.requests[3], second.result.interruption.prompt)
    assert llm_server.requests[3].messages[-2] == {"role": "user", "content": "just the usual people"}
    [entry] = await entries(owner_id=user.pk)
    assert entry.errors == {"recipient": "Invalid email: it must contain @"}
    stored = await sync_to_async(list)(Message.objects.filter(conversation_id=first.conversation_id)
                                       .values_list("role", flat=True))
    assert stored[-2:] == ["user", "assistant"]


async def test_schema_change_discards_the_paused_agent(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    first = await _park_email_agent(make_orchestrator(tools=build_agent_tools()[0]), llm_server, user)
    # A new deployment: the recipient field is now optional, so the version differs.
    upgraded = make_orchestrator(tools=build_agent_tools(recipient_required=False)[0])
    llm_server.script(text("Sorry, let's start that email again."))
    second = await upgraded.handle_message(user_id=user.pk, content="team@example.com",
                                           conversation_id=first.conversation_id)
    assert second.result.response == "Sorry, let's start that email again."
    assert await entries(owner_id=user.pk) == []


async def test_expired_agent_is_not_resumed_and_the_task_deletes_it(make_orchestrator: Any, llm_server: Any,
                                                                    user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    first = await _park_email_agent(orchestrator, llm_server, user)
    await sync_to_async(AgentPoolEntry.objects.update)(expires_at=timezone.now() - timedelta(seconds=1))
    llm_server.script(text("Who should get it?"))
    second = await orchestrator.handle_message(user_id=user.pk, content="team@example.com",
                                               conversation_id=first.conversation_id)
    assert second.result.response == "Who should get it?"
    [entry] = await entries(owner_id=user.pk)
    assert entry.status == AgentPoolEntry.Status.WAITING_FOR_INPUT  # never claimed
    assert await sync_to_async(services.pool_entry_restore)(entry=entry) is None
    assert await sync_to_async(expire_pool_entries)() == 1
    assert await entries() == []


async def test_per_tenant_limit_becomes_an_error_result(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0], max_agents_per_tenant=1)
    await _park_email_agent(orchestrator, llm_server, user)
    llm_server.script(tool_calls(("call_again", "SendEmailAgent", EMAIL_NO_RECIPIENT)),
                      text("You have too many unfinished tasks; finish one first."))
    other = await orchestrator.handle_message(user_id=user.pk, content="email the board too")
    assert other.result.status == RunStatus.COMPLETED
    sent = llm_server.requests[-1].messages
    [result] = [m for m in sent if m["role"] == "tool" and m["tool_call_id"] == "call_again"]
    assert "limit" in result["content"] and result["content"].startswith("Error:")
    assert len(await entries(owner_id=user.pk)) == 1


async def test_other_tenants_and_conversations_never_reach_the_agent(make_orchestrator: Any, llm_server: Any,
                                                                     user: Any, other_user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    first = await _park_email_agent(orchestrator, llm_server, user)
    [entry] = await entries(owner_id=user.pk)
    llm_server.script(text("Hello other user."), text("Hello again, new conversation."))
    theirs = await orchestrator.handle_message(user_id=other_user.pk, content="bob@example.com")
    mine_elsewhere = await orchestrator.handle_message(user_id=user.pk, content="carol@example.com")
    assert theirs.result.response == "Hello other user."
    assert mine_elsewhere.result.response == "Hello again, new conversation."
    assert await sync_to_async(selectors.pending_for_conversation)(
        owner_id=other_user.pk, conversation_id=first.conversation_id) == []
    assert await sync_to_async(services.pool_entry_resume)(entry_id=entry.id, owner_id=other_user.pk) is None
    [unchanged] = await entries(owner_id=user.pk)
    assert unchanged.status == AgentPoolEntry.Status.WAITING_FOR_INPUT and unchanged.errors == {}


async def test_a_claim_is_exclusive(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    await _park_email_agent(make_orchestrator(tools=build_agent_tools()[0]), llm_server, user)
    [entry] = await entries(owner_id=user.pk)
    claimed = await sync_to_async(services.pool_entry_resume)(entry_id=entry.id, owner_id=user.pk)
    assert claimed is not None and claimed.status == AgentPoolEntry.Status.RUNNING
    assert await sync_to_async(services.pool_entry_resume)(entry_id=entry.id, owner_id=user.pk) is None
    # A claim abandoned by a dead process becomes claimable again after the stale window.
    later = timezone.now() + timedelta(minutes=10)
    assert await sync_to_async(services.pool_entry_resume)(entry_id=entry.id, owner_id=user.pk, now=later) is not None


async def test_pool_survives_a_restart(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    first = await _park_email_agent(make_orchestrator(tools=build_agent_tools()[0]), llm_server, user)
    fresh = make_orchestrator(tools=build_agent_tools()[0])  # new classes, new registries, same definitions
    llm_server.script(route(recipient="team@example.com"), text("Sent."))
    second = await fresh.handle_message(user_id=user.pk, content="team@example.com",
                                        conversation_id=first.conversation_id)
    assert second.result.response == "Sent."
    assert "Email sent to team@example.com" in llm_server.requests[-1].messages[-1]["content"]


async def test_approval_yes_runs_the_agent_and_no_cancels_it(make_orchestrator: Any, llm_server: Any,
                                                             user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    llm_server.script(tool_calls(("call_t", "TransferMoneyAgent", {"payee": "Alice", "amount": 25})),
                      text("Shall I send Alice 25 EUR?"))
    first = await orchestrator.handle_message(user_id=user.pk, content="send Alice 25 euros")
    assert first.result.status == RunStatus.WAITING_FOR_APPROVAL
    [approval] = first.result.pending_approvals
    assert approval["action_summary"] == "Transfer 25 EUR to Alice" and approval["agent_name"] == "TransferMoneyAgent"
    assert approval["details"] == {"payee": "Alice", "amount": 25} and approval["pool_entry"]
    assert first.result.response == "Shall I send Alice 25 EUR?"
    assert_phrasing_request(llm_server.requests[-1], first.result.interruption.prompt)
    llm_server.script(text("Transferred."))
    done = await orchestrator.handle_message(user_id=user.pk, content="yes", conversation_id=first.conversation_id)
    assert done.result.response == "Transferred."
    assert llm_server.requests[-1].messages[-1]["content"] == "Transferred 25 EUR to Alice."

    llm_server.script(tool_calls(("call_t2", "TransferMoneyAgent", {"payee": "Bob", "amount": 5})),
                      text("Send Bob 5 EUR?"), text("OK, I won't send it."))
    again = await orchestrator.handle_message(user_id=user.pk, content="and Bob 5",
                                              conversation_id=first.conversation_id)
    assert again.result.status == RunStatus.WAITING_FOR_APPROVAL
    declined = await orchestrator.handle_message(user_id=user.pk, content="no", conversation_id=first.conversation_id)
    assert declined.result.response == "OK, I won't send it."
    assert "cancelled" in llm_server.requests[-1].messages[-1]["content"]
    assert await entries(owner_id=user.pk) == []


async def test_cancel_phrase_drops_the_agent_and_goes_to_the_loop(make_orchestrator: Any, llm_server: Any,
                                                                  user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    first = await _park_email_agent(orchestrator, llm_server, user)
    llm_server.script(text("No problem, I dropped the email."))
    second = await orchestrator.handle_message(user_id=user.pk, content="never mind",
                                               conversation_id=first.conversation_id)
    assert second.result.response == "No problem, I dropped the email."
    sent = llm_server.requests[-1].messages
    assert_valid_tool_ordering(sent)
    assert sent[-1]["content"] == "The user cancelled this task before it finished."
    assert await entries(owner_id=user.pk) == []


async def test_expiry_task_has_a_beat_schedule_and_others_are_left_alone() -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    def check() -> None:
        task = PeriodicTask.objects.get(name=services.EXPIRY_TASK_NAME)
        assert task.task == "pool.tasks.expire_pool_entries" and task.enabled
        every = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.HOURS)
        PeriodicTask.objects.create(name="someone's trigger", task="triggers.run", interval=every)
        task.enabled = False
        task.save()
        services.pool_expiry_schedule_sync()
        assert PeriodicTask.objects.filter(name="someone's trigger").exists()
        assert not PeriodicTask.objects.get(name=services.EXPIRY_TASK_NAME).enabled  # operator's choice kept

    await sync_to_async(check)()
