"""A waiting agent's question reaches the user in the persona's voice (GitHub issue 5).

The loop ends ``Interrupted`` and makes one more call without tools that rewords the agent's
raw question; a failing call falls back to the raw question, and the knob turns it off.
Scripted LLM server, real SDK, real database.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from orchestrator.models import LoopRun, LoopTurn, Message
from orchestrator.types import RunStatus
from pool.models import AgentPoolEntry
from tests.llm_server import Step, error, text, tool_calls
from tests.pool.conftest import assert_phrasing_request, build_agent_tools, route

pytestmark = [pytest.mark.django_db(transaction=True)]

QUESTION = "What is the recipient (Recipient email address)?"
PHRASED = "Happy to! Who should I send it to?"
EMAIL = {"subject": "NYC trip", "body": "See you"}


async def _ask(orchestrator: Any, user: Any, content: str = "email the team", conversation: Any = None) -> Any:
    return await orchestrator.handle_message(user_id=user.pk, content=content, conversation_id=conversation)


def _orchestrator(make_orchestrator: Any, **config: Any) -> Any:
    return make_orchestrator(tools=build_agent_tools()[0], **config)


def _turns(run_id: str) -> list[tuple[int, str, int, int]]:
    return list(LoopTurn.objects.filter(run_id=run_id).order_by("index")
                .values_list("index", "output_text", "input_tokens", "output_tokens"))


async def test_phrasing_request_has_no_tools_and_carries_question_and_persona(make_orchestrator: Any,
                                                                              llm_server: Any, user: Any) -> None:
    orchestrator = _orchestrator(make_orchestrator)
    llm_server.script(tool_calls(("call_mail", "SendEmailAgent", EMAIL), usage=(100, 10)), text(PHRASED, usage=(40, 6)))
    outcome = await _ask(orchestrator, user)
    result = outcome.result
    assert result.status == RunStatus.WAITING_FOR_INPUT and result.response == PHRASED
    assert result.interruption.prompt == QUESTION and result.interruption.agent_name == "SendEmailAgent"
    phrasing = llm_server.requests[1]
    assert "tools" not in phrasing.body
    assert_phrasing_request(phrasing, QUESTION)
    assert phrasing.messages[0]["role"] == "system"
    assert phrasing.messages[0]["content"].startswith("You are Koi, a cheerful test persona.")
    # The history it words the question from ends with the agent's tool result.
    assert phrasing.messages[-2]["role"] == "tool" and QUESTION in phrasing.messages[-2]["content"]
    # Counted and recorded like any other LLM call; persisted as the run's answer.
    assert result.turns == 2 and result.token_usage.input_tokens == 140 and result.token_usage.output_tokens == 16
    assert await sync_to_async(_turns)(outcome.run_id) == [(1, "", 100, 10), (2, PHRASED, 40, 6)]
    run = await sync_to_async(LoopRun.objects.get)(id=outcome.run_id)
    assert run.response == PHRASED and run.input_tokens == 140
    stored = await sync_to_async(list)(Message.objects.filter(run_id=outcome.run_id).values_list("role", "content"))
    assert stored[-1] == ("assistant", PHRASED)
    assert not any(PHRASED in str(m.get("content")) for m in result.new_messages)  # not twice in the history
    assert await sync_to_async(AgentPoolEntry.objects.filter(owner_id=user.pk).count)() == 1


@pytest.mark.parametrize("failure", [error(500), error(401, message="bad key")], ids=["http-500", "escalated-401"])
async def test_failing_phrasing_falls_back_to_the_raw_question(make_orchestrator: Any, llm_server: Any, user: Any,
                                                               failure: Step) -> None:
    orchestrator = _orchestrator(make_orchestrator, llm_transient_retries=0)
    llm_server.script(tool_calls(("call_mail", "SendEmailAgent", EMAIL)), failure)
    result = (await _ask(orchestrator, user)).result
    assert result.status == RunStatus.WAITING_FOR_INPUT and result.error == ""
    assert result.response == QUESTION
    assert len(llm_server.requests) == 2 and llm_server.remaining == 0
    assert await sync_to_async(AgentPoolEntry.objects.filter(owner_id=user.pk).count)() == 1


async def test_phrase_agent_questions_off_makes_no_extra_call(make_orchestrator: Any, llm_server: Any,
                                                              user: Any) -> None:
    orchestrator = _orchestrator(make_orchestrator, phrase_agent_questions=False)
    assert orchestrator.config.phrase_agent_questions is False
    llm_server.script(tool_calls(("call_mail", "SendEmailAgent", {**EMAIL, "recipient": "the team"})))
    first = await _ask(orchestrator, user)
    assert first.result.response == first.result.interruption.prompt
    assert "Invalid email" in first.result.response and first.result.turns == 1
    # The resumed agent's follow-up question is not phrased either: only the routing call is made.
    llm_server.script(route(recipient="still no address"))
    second = await _ask(orchestrator, user, "still no address", first.conversation_id)
    assert second.result.status == RunStatus.WAITING_FOR_INPUT and second.result.turns == 0
    assert second.result.response == second.result.interruption.prompt
    assert len(llm_server.requests) == 2


async def test_resumed_agents_next_question_is_phrased(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    orchestrator = _orchestrator(make_orchestrator)
    llm_server.script(tool_calls(("call_mail", "SendEmailAgent", {"body": "See you"})), text("Who and what subject?"))
    first = await _ask(orchestrator, user)
    llm_server.script(route(recipient="bob@x.org"), text("And the subject?", usage=(30, 4)))
    second = await _ask(orchestrator, user, "bob@x.org", first.conversation_id)
    result = second.result
    assert result.status == RunStatus.WAITING_FOR_INPUT and result.response == "And the subject?"
    assert_phrasing_request(llm_server.requests[3], result.interruption.prompt)
    assert "subject" in result.interruption.prompt.lower()
    assert result.turns == 1 and result.token_usage.input_tokens == 30
    assert await sync_to_async(_turns)(second.run_id) == [(1, "And the subject?", 30, 4)]
