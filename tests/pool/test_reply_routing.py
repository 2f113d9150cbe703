"""Routing a reply to a waiting agent: answer, new request or cancel (GitHub issue 5, point 5).

Scripted LLM server, real SDK, real database: each test asserts what the server received,
so the routing request (question, fields, reply) and the loop request are both checked.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from orchestrator.agent_tools import CANCELLED_NOTE, DROPPED_NOTES
from orchestrator.reply_routing import FALLBACK, ReplyIntent, parse_route
from orchestrator.types import RunStatus
from pool.models import AgentPoolEntry
from tests.llm_server import RecordedRequest, Step, error, text, tool_calls
from tests.pool.conftest import assert_phrasing_request, assert_valid_tool_ordering, build_agent_tools, route

pytestmark = [pytest.mark.django_db(transaction=True)]

QUESTION = "What is the recipient (Recipient email address)?"
PHRASED = "Who should get this email?"


def _entries(**filters: Any) -> list[AgentPoolEntry]:
    return list(AgentPoolEntry.objects.filter(**filters))


entries = sync_to_async(_entries)


async def _park(orchestrator: Any, llm_server: Any, user: Any, arguments: dict[str, Any]) -> Any:
    """The email agent waits for input; its question went through the phrasing call (requests[1])."""
    llm_server.script(tool_calls(("call_mail", "SendEmailAgent", arguments)), text(PHRASED))
    outcome = await orchestrator.handle_message(user_id=user.pk, content="email the team")
    assert outcome.result.status == RunStatus.WAITING_FOR_INPUT and outcome.result.response == PHRASED
    assert_phrasing_request(llm_server.requests[1], outcome.result.interruption.prompt)
    return outcome


def _routing_prompt(request: RecordedRequest) -> str:
    """The routing request's user message, after checking it offered only ``route_reply``."""
    assert [t["function"]["name"] for t in request.tools] == ["route_reply"]
    assert request.messages[0]["role"] == "system"
    return request.messages[-1]["content"]


async def test_change_of_subject_drops_the_agent_and_the_loop_answers(make_orchestrator: Any, llm_server: Any,
                                                                      user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    first = await _park(orchestrator, llm_server, user, {"subject": "NYC trip", "body": "See you"})
    assert first.result.interruption.prompt == QUESTION
    llm_server.script(route("new_request"), tool_calls(("call_w", "get_weather", {"city": "Rome"})),
                      text("Sunny in Rome today."))
    second = await orchestrator.handle_message(user_id=user.pk, content="what's the weather in Rome?",
                                               conversation_id=first.conversation_id)
    assert second.result.status == RunStatus.COMPLETED and second.result.response == "Sunny in Rome today."
    assert await entries(owner_id=user.pk) == []
    prompt = _routing_prompt(llm_server.requests[2])
    assert QUESTION in prompt and "what's the weather in Rome?" in prompt
    assert "recipient: Recipient email address (must contain @)" in prompt
    loop_request = llm_server.requests[3]
    assert {t["function"]["name"] for t in loop_request.tools} >= {"get_weather", "SendEmailAgent"}
    sent = loop_request.messages
    assert_valid_tool_ordering(sent)
    assert [m["role"] for m in sent[-3:]] == ["user", "assistant", "tool"]
    assert sent[-3]["content"] == "what's the weather in Rome?"
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "SendEmailAgent"
    assert sent[-1]["content"] == DROPPED_NOTES[ReplyIntent.NEW_REQUEST]
    assert llm_server.requests[4].messages[-1]["content"] == "Sunny, 15C in Rome on today"
    # The stored history stays valid for the API, and the next message is not routed.
    llm_server.script(text("You're welcome!"))
    await orchestrator.handle_message(user_id=user.pk, content="thanks", conversation_id=first.conversation_id)
    assert_valid_tool_ordering(llm_server.requests[-1].messages)
    assert len(llm_server.requests) == 6


async def test_cancel_in_own_words_drops_the_agent(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    first = await _park(orchestrator, llm_server, user, {"subject": "NYC trip", "body": "See you"})
    llm_server.script(route("cancel", recipient="ignored@example.com"), text("OK, I dropped the email."))
    second = await orchestrator.handle_message(user_id=user.pk, content="forget the email, I'll write it myself",
                                               conversation_id=first.conversation_id)
    assert second.result.response == "OK, I dropped the email."
    assert await entries(owner_id=user.pk) == []
    assert "forget the email" in _routing_prompt(llm_server.requests[2])
    sent = llm_server.requests[-1].messages
    assert_valid_tool_ordering(sent)
    assert sent[-1]["content"] == CANCELLED_NOTE


async def test_several_fields_extracted_from_free_text_reach_the_agent(make_orchestrator: Any, llm_server: Any,
                                                                       user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    first = await _park(orchestrator, llm_server, user, {"body": "Lunch at noon?"})
    assert first.result.interruption.prompt.startswith("I still need: recipient")
    llm_server.script(route(recipient="bob@x.org", subject="Lunch", cc=None), text("Sent to Bob."))
    second = await orchestrator.handle_message(user_id=user.pk, content="send it to bob@x.org with subject Lunch",
                                               conversation_id=first.conversation_id)
    assert second.result.response == "Sent to Bob."
    assert await entries(owner_id=user.pk) == []
    routing = llm_server.requests[2]
    _routing_prompt(routing)
    values_schema = routing.tools[0]["function"]["parameters"]["properties"]["values"]
    assert set(values_schema["properties"]) == {"recipient", "subject"}
    assert llm_server.requests[-1].messages[-1]["content"] == "Email sent to bob@x.org (subject: Lunch)."


async def test_invalid_extracted_value_is_asked_again(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    first = await _park(orchestrator, llm_server, user, {"subject": "NYC trip", "body": "See you"})
    llm_server.script(route(recipient="the usual people"), text("That needs an @ - which address?"))
    second = await orchestrator.handle_message(user_id=user.pk, content="the usual people",
                                               conversation_id=first.conversation_id)
    assert second.result.status == RunStatus.WAITING_FOR_INPUT
    assert "Invalid email: it must contain @" in second.result.interruption.prompt
    assert_phrasing_request(llm_server.requests[-1], second.result.interruption.prompt)
    assert second.result.response == "That needs an @ - which address?"
    [entry] = await entries(owner_id=user.pk)
    assert entry.status == AgentPoolEntry.Status.WAITING_FOR_INPUT


@pytest.mark.parametrize("broken", [
    error(500),
    tool_calls(("route_reply", "{not json")),
    tool_calls(("route_reply", {"intent": "maybe"})),
    tool_calls(("something_else", {"intent": "cancel"})),
    text("It is an answer."),
], ids=["http-500", "invalid-json", "unknown-intent", "wrong-tool", "no-tool-call"])
async def test_broken_routing_falls_back_to_the_answer(make_orchestrator: Any, llm_server: Any, user: Any,
                                                       broken: Step) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0])
    first = await _park(orchestrator, llm_server, user, {"subject": "NYC trip", "body": "See you"})
    llm_server.script(broken, text("Sent."))
    second = await orchestrator.handle_message(user_id=user.pk, content="team@example.com",
                                               conversation_id=first.conversation_id)
    assert second.result.status == RunStatus.COMPLETED and second.result.response == "Sent."
    assert llm_server.requests[-1].messages[-1]["content"] == "Email sent to team@example.com (subject: NYC trip)."
    assert await entries(owner_id=user.pk) == []


async def test_routing_can_be_turned_off(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    orchestrator = make_orchestrator(tools=build_agent_tools()[0], route_agent_replies=False)
    assert orchestrator.config.route_agent_replies is False
    first = await _park(orchestrator, llm_server, user, {"subject": "NYC trip", "body": "See you"})
    llm_server.script(text("Sent."))
    second = await orchestrator.handle_message(user_id=user.pk, content="team@example.com",
                                               conversation_id=first.conversation_id)
    assert second.result.response == "Sent."
    assert len(llm_server.requests) == 3
    assert "route_reply" not in {t["function"]["name"] for t in llm_server.requests[2].tools}
    assert llm_server.requests[-1].messages[-1]["content"] == "Email sent to team@example.com (subject: NYC trip)."


def test_parse_route_keeps_only_asked_fields_of_an_answer() -> None:
    from orchestrator.agents import InputField

    asked = [InputField("recipient"), InputField("subject")]
    routed = parse_route({"intent": "answer", "values": {"recipient": "a@b.c", "subject": "", "body": "x"}}, asked)
    assert routed.intent == ReplyIntent.ANSWER and routed.values == {"recipient": "a@b.c"}
    assert parse_route({"intent": "new_request", "values": {"recipient": "a@b.c"}}, asked).values == {}
    assert parse_route({"intent": ["answer"]}, asked) == FALLBACK
    assert parse_route({"intent": "answer", "values": "a@b.c"}, asked) == FALLBACK
    assert parse_route(None, asked) == FALLBACK
