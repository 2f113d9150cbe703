"""The ReAct loop end to end: real SDK, scripted HTTP server, real database."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from onevalet_site.errors import InvalidInput, ServiceUnavailable, TooLarge
from orchestrator.models import LoopRun, LoopTurn, Message, ToolInvocation
from tests.llm_server import context_overflow, error, text, tool_calls

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_answer_without_tools(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    llm_server.script(text("Hello there!", usage=(50, 3)))
    outcome = await make_orchestrator().handle_message(user_id=user.pk, content="hi")
    result = outcome.result
    assert result.response == "Hello there!"
    assert result.turns == 1 and result.tool_calls == []
    assert result.token_usage.input_tokens == 50 and result.token_usage.output_tokens == 3
    sent = llm_server.requests[0]
    assert sent.messages[-1] == {"role": "user", "content": "hi"}
    assert sent.tools and {t["function"]["name"] for t in sent.tools} >= {"get_weather", "explode"}


@pytest.mark.smoke
async def test_persona_time_and_capabilities_in_system_prompt(make_orchestrator: Any, llm_server: Any,
                                                               user: Any) -> None:
    await sync_to_async(_set_timezone)(user, "Asia/Tokyo")
    llm_server.script(text("ok"))
    await make_orchestrator().handle_message(user_id=user.pk, content="what time is it?")
    system = llm_server.requests[0].messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are Koi, a cheerful test persona.")
    assert "Asia/Tokyo" in system["content"] and "UTC+0900" in system["content"]
    assert "get_weather" in system["content"]


def _set_timezone(user: Any, tz: str) -> None:
    profile = user.valet_profile
    profile.timezone = tz
    profile.save()


async def test_three_slow_tools_in_one_turn_run_concurrently(make_orchestrator: Any, llm_server: Any,
                                                             user: Any) -> None:
    llm_server.script(
        tool_calls(("slow_lookup", {"key": "a"}), ("slow_lookup", {"key": "b"}), ("blocking_lookup", {"key": "c"})),
        text("all done"),
    )
    orchestrator = make_orchestrator()
    started = time.monotonic()
    outcome = await orchestrator.handle_message(user_id=user.pk, content="look up a, b, c")
    loop_tools_ms = sum(t.llm_duration_ms for t in outcome.result.turn_records)
    elapsed = time.monotonic() - started
    durations = [r.duration_ms for r in outcome.result.tool_calls]
    assert all(d >= 290 for d in durations)
    # Three 0.3 s tools (two async, one blocking its thread) overlap: well under 0.6 s total.
    assert elapsed - loop_tools_ms / 1000 < 0.6, (elapsed, durations)
    tool_messages = [m for m in llm_server.requests[1].messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["value of a", "value of b", "blocking value of c"]


async def test_tool_errors_become_results_and_the_loop_goes_on(make_orchestrator: Any, llm_server: Any,
                                                               user: Any) -> None:
    llm_server.script(
        tool_calls(("explode", {"reason": "test"}), ("never_returns", {}), ("no_such_tool", {"x": 1}),
                   ("get_weather", '{"city": "Par'), ("get_weather", {"city": 42}), ("get_weather", {"town": "x"})),
        text("Some things failed, sorry."),
    )
    outcome = await make_orchestrator(tool_execution_timeout=0.2).handle_message(user_id=user.pk, content="go")
    assert outcome.result.response == "Some things failed, sorry."
    results = [m["content"] for m in llm_server.requests[1].messages if m["role"] == "tool"]
    assert "RuntimeError: kaboom: test" in results[0]
    assert "timed out after 0.2 seconds" in results[1]
    assert "no tool named 'no_such_tool'" in results[2] and "get_weather" in results[2]
    assert "not valid JSON" in results[3]
    assert "city must be a string" in results[4]
    assert "unknown argument(s) town" in results[5]
    assert all(r.startswith("Error:") for r in results)
    records = outcome.result.tool_calls
    assert [r.success for r in records] == [False] * 6
    assert all(r.result_status == "ERROR" for r in records)
    stored = await sync_to_async(lambda: list(Message.objects.filter(role="tool").values_list("is_error", flat=True)))()
    assert stored == [True] * 6


async def test_max_turns_asks_for_an_answer_without_tools(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    llm_server.script(
        tool_calls(("get_weather", {"city": "Oslo"})),
        tool_calls(("get_weather", {"city": "Bergen"})),
        text("Oslo and Bergen are sunny."),
    )
    outcome = await make_orchestrator(max_turns=2).handle_message(user_id=user.pk, content="weather everywhere")
    assert outcome.result.response == "Oslo and Bergen are sunny."
    assert outcome.result.turns == 3
    last = llm_server.requests[-1]
    assert last.tools is None and "tools" not in last.body
    assert "Answer the user now" in last.messages[-1]["content"]
    assert llm_server.requests[0].tools is not None


async def test_rate_limit_then_success_after_backoff(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    llm_server.script(error(429, retry_after=0.05), error(429), text("finally"))
    started = time.monotonic()
    outcome = await make_orchestrator(llm_retry_base_delay=0.1).handle_message(user_id=user.pk, content="hi")
    elapsed = time.monotonic() - started
    assert outcome.result.response == "finally"
    assert len(llm_server.requests) == 3
    assert elapsed >= 0.05 + 0.2  # Retry-After honoured, then base * 2 ** 1
    turn = await sync_to_async(LoopTurn.objects.get)(run_id=outcome.run_id)
    assert turn.recovery_steps == ["retry:rate_limit", "retry:rate_limit"]


async def test_rate_limit_exhausted_gives_a_clear_answer(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    llm_server.script(error(429, retry_after=0), error(429, retry_after=0), error(429, retry_after=0))
    outcome = await make_orchestrator(llm_max_retries=2).handle_message(user_id=user.pk, content="hi")
    assert outcome.result.status == "failed"
    assert "rate-limiting" in outcome.result.response
    run = await sync_to_async(LoopRun.objects.get)(id=outcome.run_id)
    assert run.status == "failed" and "rate limited" in run.error


async def test_authentication_error_is_raised_to_the_caller(make_orchestrator: Any, llm_server: Any,
                                                            user: Any) -> None:
    llm_server.script(error(401, message="bad key"))
    with pytest.raises(ServiceUnavailable) as caught:
        await make_orchestrator().handle_message(user_id=user.pk, content="hi")
    assert "OPENAI_API_KEY" in str(caught.value)
    assert len(llm_server.requests) == 1  # no retry of a 401
    run = await sync_to_async(LoopRun.objects.get)()
    assert run.status == "failed"


async def test_server_error_ends_with_an_error_result_not_a_hang(make_orchestrator: Any, llm_server: Any,
                                                                user: Any) -> None:
    llm_server.script(error(500))
    outcome = await make_orchestrator().handle_message(user_id=user.pk, content="hi")
    assert outcome.result.status == "failed"
    assert "couldn't reach my language model" in outcome.result.response


async def test_context_overflow_recovery_chain(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    orchestrator = make_orchestrator(max_history_messages=6, force_trim_keep_messages=2,
                                     overflow_tool_result_chars=300)
    for i in range(5):  # build history: user, assistant(tool call), tool result (big), assistant
        llm_server.script(tool_calls(("big_result", {"size": 5000})), text(f"answer {i}"))
        first = await orchestrator.handle_message(user_id=user.pk, content=f"question {i}",
                                                  conversation_id=None if i == 0 else conversation)
        conversation = first.conversation_id
    llm_server.reset()
    llm_server.script(context_overflow(), context_overflow(), context_overflow(), text("recovered"))
    outcome = await orchestrator.handle_message(user_id=user.pk, content="and now?", conversation_id=conversation)
    assert outcome.result.response == "recovered"
    sizes = [len(r.messages) for r in llm_server.requests]
    original, trimmed, truncated, forced = llm_server.requests
    assert len(original.messages) > len(trimmed.messages) == 1 + 6 - _leading_tools(original, 6)
    assert max(len(m["content"]) for m in trimmed.messages if m["role"] == "tool") > 300
    assert max(len(m["content"]) for m in truncated.messages if m["role"] == "tool") < 300 + 120
    assert "[...truncated" in next(m["content"] for m in truncated.messages if m["role"] == "tool")
    assert len(forced.messages) <= 3 and forced.messages[0]["role"] == "system", sizes
    assert forced.messages[-1] == {"role": "user", "content": "and now?"}
    turn = await sync_to_async(LoopTurn.objects.get)(run_id=outcome.run_id)
    assert turn.recovery_steps == ["trim_history", "truncate_tool_results", "force_trim"]


def _leading_tools(request: Any, keep: int) -> int:
    rest = [m for m in request.messages if m["role"] != "system"][-keep:]
    count = 0
    while count < len(rest) and rest[count]["role"] == "tool":
        count += 1
    return count


async def test_context_overflow_after_every_step_asks_for_a_new_conversation(make_orchestrator: Any,
                                                                             llm_server: Any, user: Any) -> None:
    llm_server.script(*(context_overflow() for _ in range(4)))
    outcome = await make_orchestrator().handle_message(user_id=user.pk, content="hi")
    assert outcome.result.status == "failed"
    assert "start a new conversation" in outcome.result.response
    assert len(llm_server.requests) == 4


async def test_large_tool_result_is_truncated_with_marker(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    llm_server.script(tool_calls(("big_result", {"size": 50_000})), text("ok"))
    outcome = await make_orchestrator(context_token_limit=10_000, max_tool_result_share=0.3).handle_message(
        user_id=user.pk, content="big")
    tool_message = next(m for m in llm_server.requests[1].messages if m["role"] == "tool")
    # The limit is 30 % of a 10k-token context at the chars-per-token ratio the loop learned
    # from the first call's reported usage (exact limits: tests/orchestrator/test_context.py).
    assert len(tool_message["content"]) < 40_000
    assert "[...truncated" in tool_message["content"]
    # Cut at a line boundary: the kept text ends with a whole line of x's.
    kept = tool_message["content"].split("\n[...truncated")[0]
    assert kept.endswith("x" * 99)
    assert outcome.result.tool_calls[0].result_chars == 50_000


async def test_empty_and_oversized_messages_are_refused_without_llm_call(make_orchestrator: Any,
                                                                         llm_server: Any, user: Any) -> None:
    orchestrator = make_orchestrator(max_input_chars=100)
    with pytest.raises(InvalidInput):
        await orchestrator.handle_message(user_id=user.pk, content="   ")
    with pytest.raises(TooLarge) as caught:
        await orchestrator.handle_message(user_id=user.pk, content="x" * 101)
    assert "too long" in caught.value.message
    assert llm_server.requests == []
    assert await sync_to_async(Message.objects.count)() == 0


async def test_everything_is_persisted(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    llm_server.script(tool_calls(("get_weather", {"city": "Paris"}), ("whoami", {})),
                      text("Paris is sunny.", usage=(120, 5)))
    outcome = await make_orchestrator().handle_message(user_id=user.pk, content="weather in Paris?", source="api")

    def load() -> tuple[list[Any], Any, list[Any], list[Any]]:
        messages = list(Message.objects.filter(conversation_id=outcome.conversation_id).order_by("id"))
        return messages, LoopRun.objects.get(id=outcome.run_id), list(LoopTurn.objects.filter(run_id=outcome.run_id)), \
            list(ToolInvocation.objects.filter(run_id=outcome.run_id))

    messages, run, turns, invocations = await sync_to_async(load)()
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert messages[1].tool_calls[0]["name"] == "get_weather"
    assert json.loads(messages[1].tool_calls[0]["arguments"]) == {"city": "Paris"}
    assert messages[2].name == "get_weather" and messages[2].content.startswith("Sunny")
    assert f"tenant={user.pk}" in messages[3].content and outcome.conversation_id in messages[3].content
    assert run.status == "completed" and run.response == "Paris is sunny." and run.turns == 2
    assert run.source == "api" and run.finished_at is not None
    assert [t.index for t in turns] == [1, 2] and turns[1].input_tokens == 120
    assert {i.name for i in invocations} == {"get_weather", "whoami"}
    assert all(i.success and i.owner_id == user.pk for i in invocations)


async def test_history_is_sent_on_the_next_message(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    orchestrator = make_orchestrator()
    llm_server.script(tool_calls(("get_weather", {"city": "Rome"})), text("Rome is sunny."), text("You asked about Rome."))
    first = await orchestrator.handle_message(user_id=user.pk, content="weather in Rome?")
    await orchestrator.handle_message(user_id=user.pk, content="what did I ask?", conversation_id=first.conversation_id)
    roles = [m["role"] for m in llm_server.requests[2].messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]


async def test_another_users_conversation_is_not_found(make_orchestrator: Any, llm_server: Any, user: Any,
                                                       other_user: Any) -> None:
    from onevalet_site.errors import NotFound

    llm_server.script(text("mine"))
    mine = await make_orchestrator().handle_message(user_id=user.pk, content="hi")
    with pytest.raises(NotFound):
        await make_orchestrator().handle_message(user_id=other_user.pk, content="hi",
                                                 conversation_id=mine.conversation_id)
    with pytest.raises(NotFound):
        await make_orchestrator().handle_message(user_id=user.pk, content="hi", conversation_id="not-a-uuid")


async def test_stream_message_yields_events_in_order(make_orchestrator: Any, llm_server: Any, user: Any) -> None:
    llm_server.script(tool_calls(("get_weather", {"city": "Lima"})), text("Lima is sunny and warm today."))
    events = [e.as_dict() async for e in make_orchestrator().stream_message(user_id=user.pk, content="Lima?")]
    types = [e["type"] for e in events]
    assert types[:2] == ["message_start", "message_end"]
    assert types[2:4] == ["tool_call_start", "tool_result"]
    assert types[4] == "message_start" and types[-2:] == ["message_end", "execution_end"]
    chunks = [e["delta"] for e in events if e["type"] == "message_chunk"]
    assert len(chunks) > 1 and "".join(chunks) == "Lima is sunny and warm today."
    assert events[-1]["summary"]["response"] == "Lima is sunny and warm today."
    assert all(r.stream for r in llm_server.requests)
