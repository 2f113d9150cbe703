"""The ReAct loop: LLM → tool calls (concurrent) → results → LLM … → answer.

Pure: no ORM, no Django. It takes the prepared messages, the tools, an LLM client and an
event sink, and returns a ``ReactLoopResult`` that the orchestrator persists. Each turn
ends in one of a closed set of outcomes (``FinalAnswer``, ``Continue``, ``Interrupted``,
``GaveUp``) dispatched exhaustively in ``run``. A run that ends ``Interrupted`` makes one
more call without tools so the waiting agent's raw question reaches the user in the
persona's voice (``phrase_question``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, assert_never

from orchestrator.config import ReactLoopConfig
from orchestrator.context import ContextManager, message_chars
from orchestrator.events import (
    EventSink,
    MessageChunk,
    MessageEnd,
    MessageStart,
    StateChange,
    ToolCallStart,
    ToolResultEvent,
)
from orchestrator.llm import LLMClient
from orchestrator.llm_errors import Attempt, Escalate, GiveUp, RecoverContext, Retry, decide
from orchestrator.tool_schema import ArgumentError
from orchestrator.tools import Tool, ToolExecutionContext
from orchestrator.types import (
    Interruption,
    LLMResponse,
    ReactLoopResult,
    RunStatus,
    TokenUsage,
    ToolCall,
    ToolCallRecord,
    ToolOutcome,
    TurnRecord,
)

logger = logging.getLogger("onevalet.loop")

Message = dict[str, Any]

MAX_TURNS_INSTRUCTION = (
    "You have used all the steps you may take for this request. Answer the user now, "
    "using only the information gathered so far, and say what could not be completed."
)
# Sent as a user-role message, like MAX_TURNS_INSTRUCTION: some chat templates reject a
# system message anywhere but first, and this one follows the tool results.
PHRASE_INSTRUCTION = (
    "An action is waiting for the user. Ask them for exactly this, in your own voice, briefly, "
    "without inventing details:\n\n{question}"
)
SECRET_ARG_HINTS = ("password", "secret", "token", "api_key", "apikey", "credential")
PREVIEW_CHARS = 200


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    text: str


@dataclass(frozen=True, slots=True)
class Continue:
    pass


@dataclass(frozen=True, slots=True)
class Interrupted:
    """An agent-tool waits for the user; ``response`` is its question as phrased for them ("" = raw)."""

    interruption: Interruption
    response: str = ""


TurnOutcome = FinalAnswer | Continue | Interrupted | GiveUp


def summarize_arguments(arguments: Any, limit: int) -> dict[str, Any]:
    """A short, secret-free view of a call's arguments for telemetry and events."""
    if not isinstance(arguments, dict):
        return {"_raw": str(arguments)[:limit]}
    summary: dict[str, Any] = {}
    for key, value in arguments.items():
        if any(hint in key.lower() for hint in SECRET_ARG_HINTS):
            summary[key] = "***"
        elif isinstance(value, str):
            summary[key] = value if len(value) <= limit else value[:limit] + "…"
        elif isinstance(value, (int, float, bool)) or value is None:
            summary[key] = value
        else:
            text = json.dumps(value, default=str)
            summary[key] = text if len(text) <= limit else text[:limit] + "…"
    return summary


def merge_interruptions(interruptions: list[Interruption]) -> Interruption:
    """Several agent-tools of one turn waiting at once are shown to the user together."""
    if len(interruptions) == 1:
        return interruptions[0]
    approvals = [a for i in interruptions for a in i.pending_approvals]
    status = RunStatus.WAITING_FOR_APPROVAL if approvals else RunStatus.WAITING_FOR_INPUT
    return Interruption(status=status, prompt="\n\n".join(i.prompt for i in interruptions),
                        agent_name=", ".join(i.agent_name for i in interruptions if i.agent_name),
                        pending_approvals=approvals)


class ReactLoop:
    """One run of the loop. Create a new instance per handled message."""

    def __init__(self, *, llm: LLMClient, tools: list[Tool], config: ReactLoopConfig, tool_context: ToolExecutionContext,
                 emit: EventSink, run_id: str, stream: bool = False) -> None:
        self.llm = llm
        self.tools = {t.name: t for t in tools}
        self.tool_schemas = [t.schema() for t in tools] or None
        self._tools_chars = len(json.dumps(self.tool_schemas)) if self.tool_schemas else 0
        self.config = config
        self.context_manager = ContextManager(config)
        self.tool_context = tool_context
        self.emit = emit
        self.run_id = run_id
        self.stream = stream
        self.messages: list[Message] = []
        self.new_messages: list[Message] = []
        self.records: list[ToolCallRecord] = []
        self.turn_records: list[TurnRecord] = []
        self.usage = TokenUsage()

    async def run(self, messages: list[Message]) -> ReactLoopResult:
        started = time.monotonic()
        self.messages = list(messages)
        outcome: TurnOutcome = Continue()
        for turn in range(1, self.config.max_turns + 1):
            outcome = await self._turn(turn)
            if not isinstance(outcome, Continue):
                break
        else:
            outcome = await self._final_answer_without_tools(self.config.max_turns + 1)
        if isinstance(outcome, Interrupted) and self.config.phrase_agent_questions:
            phrased = await self.phrase_question(self.messages, outcome.interruption.prompt)
            outcome = Interrupted(outcome.interruption, response=phrased)
        return self._result(outcome, started)

    def _result(self, outcome: TurnOutcome, started: float) -> ReactLoopResult:
        result = ReactLoopResult(response="", turns=len(self.turn_records), tool_calls=self.records,
                                 token_usage=self.usage, duration_ms=0, new_messages=self.new_messages,
                                 turn_records=self.turn_records)
        match outcome:
            case FinalAnswer(text=text):
                result.response, result.status = text, RunStatus.COMPLETED
            case Interrupted(interruption=interruption, response=response):
                result.response, result.status = response or interruption.prompt, interruption.status
                result.interruption = interruption
                result.pending_approvals = interruption.pending_approvals
            case GiveUp(response=response, error=error):
                result.response, result.status, result.error = response, RunStatus.FAILED, error
            case Continue():
                raise AssertionError("the loop ended on a Continue outcome")
            case _:
                assert_never(outcome)
        result.duration_ms = int((time.monotonic() - started) * 1000)
        return result

    async def _turn(self, turn: int) -> TurnOutcome:
        self.messages = self.context_manager.trim_if_needed(self.messages, self._tools_chars)
        response = await self._call_llm(turn, self.tool_schemas)
        if isinstance(response, GiveUp):
            return response
        self._append(_assistant_message(response))
        if not response.tool_calls:
            return FinalAnswer(response.content)
        outcomes = await asyncio.gather(*(self._run_tool(turn, call, response.usage) for call in response.tool_calls))
        for call, outcome in zip(response.tool_calls, outcomes, strict=True):
            self._append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
        interruptions = [o.interruption for o in outcomes if o.interruption is not None]
        if interruptions:
            interruption = merge_interruptions(interruptions)
            await self.emit(StateChange(run=self.run_id, state=str(interruption.status), prompt=interruption.prompt,
                                        agent=interruption.agent_name,
                                        pending_approvals=interruption.pending_approvals))
            return Interrupted(interruption)
        return Continue()

    async def _final_answer_without_tools(self, turn: int) -> TurnOutcome:
        self.messages = [*self.messages, {"role": "user", "content": MAX_TURNS_INSTRUCTION}]
        self.messages = self.context_manager.trim_if_needed(self.messages)
        response = await self._call_llm(turn, None)
        if isinstance(response, GiveUp):
            return response
        self._append(_assistant_message(response))
        return FinalAnswer(response.content)

    async def phrase_question(self, messages: list[Message], question: str) -> str:
        """``question`` (a waiting agent's, e.g. "Please provide: subject") in the persona's voice.

        One call without tools on ``messages`` plus an instruction, counted in ``usage`` and
        recorded as a turn like any other. Neither the instruction nor the reply joins
        ``new_messages``: the history keeps the tool result, and the phrased text is persisted
        as the run's response. Any failure (the strategy table gives up, an escalated or
        unexpected error) or an empty reply falls back to the raw question: a run that is only
        waiting for the user must never fail because of the wording.
        """
        kept = self.messages
        instruction = {"role": "user", "content": PHRASE_INSTRUCTION.format(question=question)}
        try:
            self.messages = self.context_manager.trim_if_needed([*messages, instruction])
            response = await self._call_llm(self._next_turn_index(), None)
        except Exception:  # the raw question is a correct, if plain, answer
            logger.warning("phrasing a waiting agent's question failed; sending it as is", exc_info=True)
            return question
        finally:
            self.messages = kept
        if isinstance(response, GiveUp) or not response.content.strip():
            return question
        return response.content

    def _next_turn_index(self) -> int:
        return self.turn_records[-1].index + 1 if self.turn_records else 1

    def _append(self, message: Message) -> None:
        self.messages.append(message)
        self.new_messages.append(message)

    async def _call_llm(self, turn: int, tools: list[dict[str, Any]] | None) -> LLMResponse | GiveUp:
        """One LLM call with the strategy table applied to every failure."""
        attempt = Attempt()
        record = TurnRecord(index=turn, input_messages=0, input_chars=0)
        self.turn_records.append(record)
        while True:
            record.input_messages = len(self.messages)
            record.input_chars = sum(message_chars(m) for m in self.messages)
            await self.emit(MessageStart(run=self.run_id, turn=turn))
            started = time.monotonic()
            try:
                response = await self.llm.complete(self.messages, tools,
                                                   on_delta=self._delta_sink(turn) if self.stream else None)
            except Exception as exc:  # every failure goes through the strategy table
                decision = decide(exc, attempt, self.config)
                match decision:
                    case Retry(delay=delay, reason=reason):
                        record.recovery_steps.append(f"retry:{reason}")
                        await asyncio.sleep(delay)
                    case RecoverContext(step=step):
                        record.recovery_steps.append(ContextManager.OVERFLOW_STEPS[step])
                        self.messages = self.context_manager.overflow_recovery_step(step, self.messages)
                    case GiveUp():
                        record.recovery_steps.append("gave_up")
                        return decision
                    case Escalate(error=error):
                        raise error from exc
                    case _:
                        assert_never(decision)
                continue
            record.llm_duration_ms = int((time.monotonic() - started) * 1000)
            record.usage = response.usage
            record.output_text = response.content
            self.usage.add(response.usage)
            self.context_manager.observe_usage(record.input_chars + self._tools_chars if tools else record.input_chars,
                                               response.usage.input_tokens)
            await self.emit(MessageEnd(run=self.run_id, turn=turn, content=response.content,
                                       input_tokens=response.usage.input_tokens,
                                       output_tokens=response.usage.output_tokens))
            return response

    def _delta_sink(self, turn: int):
        async def sink(delta: str) -> None:
            await self.emit(MessageChunk(run=self.run_id, turn=turn, delta=delta))
        return sink

    async def _run_tool(self, turn: int, call: ToolCall, turn_usage: TokenUsage) -> ToolOutcome:
        """Run one call under its timeout; every failure becomes an error result for the LLM."""
        tool = self.tools.get(call.name)
        arguments, parse_error = _parse_arguments(call.arguments)
        summary = summarize_arguments(arguments if parse_error is None else call.arguments,
                                      self.config.args_summary_chars)
        await self.emit(ToolCallStart(run=self.run_id, turn=turn, tool_call_id=call.id, name=call.name,
                                      args_summary=summary))
        started = time.monotonic()
        outcome = await self._invoke(tool, call, arguments, parse_error)
        duration_ms = int((time.monotonic() - started) * 1000)
        result_chars = len(outcome.content)
        outcome.content = self.context_manager.truncate_tool_result(outcome.content)
        record = ToolCallRecord(tool_call_id=call.id, name=call.name, args_summary=summary, duration_ms=duration_ms,
                                success=not outcome.is_error, result_status=outcome.status, result_chars=result_chars,
                                turn=turn, token_attribution=turn_usage)
        self.records.append(record)
        await self.emit(ToolResultEvent(run=self.run_id, turn=turn, tool_call_id=call.id, name=call.name,
                                        success=record.success, duration_ms=duration_ms,
                                        result_status=outcome.status, preview=outcome.content[:PREVIEW_CHARS]))
        return outcome

    async def _invoke(self, tool: Tool | None, call: ToolCall, arguments: Any, parse_error: str | None) -> ToolOutcome:
        if tool is None:
            available = ", ".join(sorted(self.tools)) or "none"
            return _error(f"Error: there is no tool named {call.name!r}. Available tools: {available}.")
        if parse_error is not None:
            return _error(f"Error: the arguments for {call.name} were not valid JSON ({parse_error}). "
                          "Send a JSON object matching the tool's parameters.")
        timeout = self.config.agent_tool_execution_timeout if tool.is_agent else self.config.tool_execution_timeout
        try:
            return await asyncio.wait_for(tool.invoke(arguments, self.tool_context.for_call(call.id)), timeout)
        except ArgumentError as exc:
            return _error(f"Error: invalid arguments for {call.name}: {exc}.")
        except TimeoutError:
            return _error(f"Error: {call.name} timed out after {timeout:g} seconds. "
                          "The service may be temporarily unavailable.")
        except Exception as exc:  # a crashed tool must not crash the run
            logger.warning("tool %s failed: %s", call.name, type(exc).__name__, exc_info=True)
            return _error(f"Error: {call.name} failed: {type(exc).__name__}: {exc}")


def _error(text: str) -> ToolOutcome:
    return ToolOutcome(content=text, is_error=True, status="ERROR")


def _parse_arguments(raw: str) -> tuple[Any, str | None]:
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, exc.msg
    if not isinstance(value, dict):
        return None, "expected a JSON object"
    return value, None


def _assistant_message(response: LLMResponse) -> Message:
    message: Message = {"role": "assistant", "content": response.content or None}
    if response.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls
        ]
    return message
