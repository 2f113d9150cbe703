"""``Orchestrator``: one handled message, end to end.

``handle_message`` runs the lifecycle — ``should_process`` (refuse before any work),
``prepare_context`` (persona, time, capabilities, history), ``check_pending_agents``
(a paused agent of this conversation gets the message first), ``react_loop``,
``post_process`` (persist) — while holding the conversation's lock, so messages of one
conversation never interleave. ``stream_message`` yields the loop's events as they happen.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zoneinfo
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, assert_never

from asgiref.sync import sync_to_async
from django.conf import settings

from onevalet_site.errors import InvalidInput, OneValetError, ServiceUnavailable, TooLarge, ws_error_event
from orchestrator import services
from orchestrator.agent_tools import AgentFinished, AgentStillWaiting, resume_pending_agent
from orchestrator.config import ReactLoopConfig
from orchestrator.events import ErrorEvent, EventSink, ExecutionEnd, LoopEvent, discard
from orchestrator.llm import LLMClient
from orchestrator.llm_errors import LLMConfigurationError
from orchestrator.locks import conversation_lock
from orchestrator.loop import ReactLoop
from orchestrator.registry import load_tool_modules
from orchestrator.tools import Tool, ToolExecutionContext, ToolRegistry, registry
from orchestrator.types import ReactLoopResult, ToolCallRecord

logger = logging.getLogger("onevalet.orchestrator")


@dataclass(slots=True)
class MessageOutcome:
    conversation_id: str
    run_id: str
    result: ReactLoopResult

    def as_dict(self) -> dict[str, Any]:
        return {"conversation": self.conversation_id, "run": self.run_id, **self.result.summary()}


@dataclass(slots=True)
class PreparedRun:
    user_id: int
    conversation_id: str
    run_id: str
    source: str
    messages: list[dict[str, Any]]
    tool_context: ToolExecutionContext
    # What happened before the loop (a resumed agent's call and result), persisted with the run.
    carried_messages: list[dict[str, Any]] = field(default_factory=list)
    carried_records: list[ToolCallRecord] = field(default_factory=list)


class Orchestrator:
    """Built once per process (or per test) and shared by every request."""

    def __init__(self, *, llm: LLMClient | None = None, tools: ToolRegistry | None = None,
                 config: ReactLoopConfig | None = None, system_prompt: str | None = None,
                 credentials: Any = None) -> None:
        self.config = config or ReactLoopConfig.from_settings()
        self.llm = llm or LLMClient.from_settings(max_output_tokens=self.config.max_output_tokens)
        if tools is None:
            load_tool_modules()
            tools = registry
        self.tools = tools
        self.system_prompt = system_prompt if system_prompt is not None else settings.ONEVALET_SYSTEM_PROMPT
        self.credentials = credentials if credentials is not None else _default_credential_store()

    # --- lifecycle ------------------------------------------------------------------------
    def should_process(self, content: Any) -> str:
        """Refuse, before any LLM call or write, what the loop must not see."""
        if not isinstance(content, str) or not content.strip():
            raise InvalidInput("The message is empty.", code="empty_message")
        if len(content) > self.config.max_input_chars:
            raise TooLarge(f"The message is too long ({len(content)} characters; the limit is "
                           f"{self.config.max_input_chars}). Please shorten it or split it up.", code="message_too_long")
        return content.strip()

    def visible_tools(self) -> list[Tool]:
        return self.tools.all()

    def system_message(self, *, timezone_name: str, display_name: str, tools: list[Tool]) -> dict[str, Any]:
        """Persona first (it is the voice of every answer), then what the framework knows."""
        try:
            tz = zoneinfo.ZoneInfo(timezone_name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            tz, timezone_name = zoneinfo.ZoneInfo("UTC"), "UTC"
        now = datetime.now(tz)
        lines = [self.system_prompt.strip(), "",
                 f"Current time for the user: {now:%A %d %B %Y, %H:%M} ({timezone_name}, UTC{now:%z}).",
                 f"The user's time zone: {timezone_name}."]
        if display_name:
            lines.append(f"The user's name: {display_name}.")
        if tools:
            lines.append("You can use these capabilities: "
                         + "; ".join(f"{t.name} ({_first_line(t.schema()['function']['description'])})" for t in tools)
                         + ". Call several at once when they do not depend on each other.")
        return {"role": "system", "content": "\n".join(lines)}

    async def prepare_context(self, *, user_id: int, content: str | None, conversation_id: Any, source: str,
                              carried_messages: list[dict[str, Any]] | None = None) -> PreparedRun:
        """Open the run and build what the loop reads: persona + time + capabilities, history,
        then ``carried_messages`` (results produced before the loop, persisted with the run)."""
        start = await sync_to_async(services.run_start)(
            owner_id=user_id, content=content, conversation_id=conversation_id, source=source,
            model=self.llm.model, history_limit=self.config.history_load_limit)
        carried = list(carried_messages or ())
        tools = self.visible_tools()
        messages = [self.system_message(timezone_name=start.timezone, display_name=start.display_name, tools=tools),
                    *start.history, *carried]
        context = ToolExecutionContext(tenant_id=user_id, conversation_id=start.conversation_id, run_id=start.run_id,
                                       timezone=start.timezone, source=source, credentials=self.credentials,
                                       extra={"thread_pool_size": self.config.tool_thread_pool_size,
                                              "loop_config": self.config, "llm": self.llm})
        return PreparedRun(user_id=user_id, conversation_id=start.conversation_id, run_id=start.run_id,
                           source=source, messages=messages, tool_context=context, carried_messages=carried)

    async def check_pending_agents(self, prepared: PreparedRun, emit: EventSink, *,
                                   stream: bool = False) -> ReactLoopResult | None:
        """A paused agent of this conversation gets the message first (see the pool app).

        Returns a finished result when the agent is still waiting (the loop is skipped), or
        None to run the loop — with the agent's outcome already appended to the messages.
        """
        last = prepared.messages[-1] if prepared.messages else {}
        if last.get("role") != "user":
            return None
        started = time.monotonic()
        outcome = await resume_pending_agent(text=str(last.get("content") or ""), context=prepared.tool_context,
                                             tools=self.tools, emit=emit)
        match outcome:
            case None:
                return None
            case AgentFinished(messages=messages, records=records):
                prepared.messages.extend(messages)
                prepared.carried_messages.extend(messages)
                prepared.carried_records.extend(records)
                return None
            case AgentStillWaiting():
                return await self._still_waiting(prepared, outcome, emit, stream=stream, started=started)
            case _:
                assert_never(outcome)

    async def _still_waiting(self, prepared: PreparedRun, waiting: AgentStillWaiting, emit: EventSink, *,
                             stream: bool, started: float) -> ReactLoopResult:
        """The result of a message a paused agent answered with another question (no loop run).

        The agent's follow-up question is phrased like the loop's first one (one call without
        tools, counted as a turn) so every question reaches the user in the persona's voice.
        """
        interruption = waiting.interruption
        loop = ReactLoop(llm=self.llm, tools=[], config=self.config, tool_context=prepared.tool_context, emit=emit,
                         run_id=prepared.run_id, stream=stream)
        response = interruption.prompt
        if waiting.phrase and self.config.phrase_agent_questions:
            response = await loop.phrase_question(prepared.messages, interruption.prompt)
        return ReactLoopResult(response=response, turns=len(loop.turn_records), tool_calls=waiting.records,
                               token_usage=loop.usage, duration_ms=int((time.monotonic() - started) * 1000),
                               pending_approvals=interruption.pending_approvals, status=interruption.status,
                               turn_records=loop.turn_records, interruption=interruption)

    async def react_loop(self, prepared: PreparedRun, emit: EventSink, *, stream: bool) -> ReactLoopResult:
        loop = ReactLoop(llm=self.llm, tools=self.visible_tools(), config=self.config,
                         tool_context=prepared.tool_context, emit=emit, run_id=prepared.run_id, stream=stream)
        result = await loop.run(prepared.messages)
        result.new_messages[:0] = prepared.carried_messages
        result.tool_calls[:0] = prepared.carried_records
        return result

    async def post_process(self, prepared: PreparedRun, result: ReactLoopResult) -> None:
        await sync_to_async(services.run_finish)(owner_id=prepared.user_id, run_id=prepared.run_id,
                                                 conversation_id=prepared.conversation_id, result=result,
                                                 source=prepared.source)

    # --- entry points ---------------------------------------------------------------------
    async def handle_message(self, *, user_id: int, content: str, conversation_id: Any = None, source: str = "web",
                             emit: EventSink = discard, stream: bool = False) -> MessageOutcome:
        text = self.should_process(content)
        if conversation_id is None:
            # A new conversation has no concurrent writers yet; create it before locking.
            conversation_id = str((await sync_to_async(services.conversation_create)(
                owner_id=user_id, title=text.splitlines()[0])).id)
        async with conversation_lock(str(conversation_id)):
            prepared = await self.prepare_context(user_id=user_id, content=text, conversation_id=conversation_id,
                                                  source=source)
            outcome = await self.run_prepared(prepared, emit, stream=stream, pending_agents=True)
        await emit(ExecutionEnd(run=outcome.run_id, conversation=outcome.conversation_id, summary=outcome.as_dict()))
        return outcome

    async def run_prepared(self, prepared: PreparedRun, emit: EventSink, *, stream: bool,
                           pending_agents: bool) -> MessageOutcome:
        """Run an opened run to its end and persist it; a run that raises is closed as failed.

        The caller holds the conversation lock. ``pending_agents`` lets a paused agent take
        the message first (a user message); a continuation has no message for one.
        """
        try:
            result = await self.check_pending_agents(prepared, emit, stream=stream) if pending_agents else None
            if result is None:
                result = await self.react_loop(prepared, emit, stream=stream)
        except LLMConfigurationError as exc:
            await sync_to_async(services.run_fail)(owner_id=prepared.user_id, run_id=prepared.run_id, error=str(exc))
            raise ServiceUnavailable(str(exc), code="llm_not_configured") from exc
        except BaseException as exc:
            await asyncio.shield(sync_to_async(services.run_fail)(
                owner_id=prepared.user_id, run_id=prepared.run_id, error=f"{type(exc).__name__}: {exc}"))
            raise
        await self.post_process(prepared, result)
        return MessageOutcome(conversation_id=prepared.conversation_id, run_id=prepared.run_id, result=result)

    async def stream_message(self, **kwargs: Any) -> AsyncIterator[LoopEvent]:
        """Yield the run's events as they happen; the last one is ``execution_end`` or ``error``."""
        queue: asyncio.Queue[LoopEvent | None] = asyncio.Queue(maxsize=256)

        async def sink(event: LoopEvent) -> None:
            await queue.put(event)

        async def run() -> None:
            try:
                await self.handle_message(emit=sink, stream=True, **kwargs)
            except Exception as exc:  # surfaced as an event; the caller decides what to show
                if not isinstance(exc, OneValetError):
                    logger.exception("run failed unexpectedly")
                body = ws_error_event(exc)
                await queue.put(ErrorEvent(code=body["code"], message=body["message"]))
            finally:
                await queue.put(None)

        task = asyncio.create_task(run())
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            if not task.done():
                task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _default_credential_store() -> Any:
    try:
        from credentials.store import CredentialStore
    except ImportError:  # the credentials app is optional for embedding the loop elsewhere
        return None
    return CredentialStore()


_default: Orchestrator | None = None


def get_orchestrator() -> Orchestrator:
    """The process-wide orchestrator built from settings."""
    global _default
    if _default is None:
        _default = Orchestrator()
    return _default
