"""Agents as tools: the schema the LLM sees, the call from the loop, the resume from the pool.

``AgentTool`` fits an agent class to the loop's ``Tool`` protocol. A call that completes
is an ordinary tool result; a call that needs the user parks the agent in the pool and
returns an ``Interruption`` so the loop stops with the agent's question as the answer.
``resume_pending_agent`` is the other half: on the user's next message, the oldest paused
agent of that conversation is claimed, gets the message, and either finishes (its outcome
becomes a tool-call/result pair the loop reads) or asks its next question. Unless it is a
cancel phrase, the reply is first routed (``orchestrator.reply_routing``): a new request or
a cancellation drops the agent and the message goes to the loop instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async

from onevalet_site.errors import LimitReached
from orchestrator.agents import AgentResult, AgentStatus, StandardAgent, agent_registry, schema_version
from orchestrator.config import ReactLoopConfig
from orchestrator.events import EventSink, StateChange, ToolCallStart, ToolResultEvent
from orchestrator.reply_routing import FALLBACK, ReplyIntent, RoutedReply, route_reply
from orchestrator.tool_schema import json_type
from orchestrator.tools import ToolExecutionContext, ToolRegistry
from orchestrator.types import Interruption, RunStatus, ToolCallRecord, ToolOutcome

logger = logging.getLogger("onevalet.agents")

APPROVAL_NOTE = " [Requires user confirmation before execution]"
TASK_INSTRUCTION_HELP = (
    "What the user wants, in plain words, including anything that fits none of the other parameters. "
    "Fill every parameter you can from the conversation; the agent asks the user for what is missing. "
    "Example: \"Remind her in a friendly tone; she asked to be reminded before leaving the office.\"")
CANCELLED_NOTE = "The user cancelled this task before it finished."
DROPPED_NOTES = {
    ReplyIntent.CANCEL: CANCELLED_NOTE,
    ReplyIntent.NEW_REQUEST: ("The user did not answer this task's question and moved on to something else, so the "
                              "task was dropped unfinished. Answer the user's latest message."),
}
_CANCEL = re.compile(r"^\s*(never\s*mind|nevermind|nvm|cancel|stop|abort|forget (it|that|about it))\b", re.I)


def loop_config(context: ToolExecutionContext) -> ReactLoopConfig:
    """The running orchestrator's config (put in the context by ``prepare_context``)."""
    config = context.extra.get("loop_config")
    return config if isinstance(config, ReactLoopConfig) else ReactLoopConfig.from_settings()


def agent_tool_schema(agent_cls: type[StandardAgent]) -> dict[str, Any]:
    """The OpenAI function schema of an agent: docstring, InputFields (all optional), task_instruction.

    Required fields are not required here: the agent asks the user for a missing one, so
    the LLM should call it with what it knows rather than guess.
    """
    description = " ".join((agent_cls.__doc__ or "").split()) or agent_cls.agent_name()
    if agent_cls.needs_approval is not StandardAgent.needs_approval:
        description += APPROVAL_NOTE
    properties: dict[str, Any] = {}
    for spec in agent_cls.input_fields:
        prop = json_type(spec.type)
        text = spec.description or spec.label()
        if spec.validator is not None and spec.validator_description:
            text = f"{text} ({spec.validator_description})"
        if not spec.required:
            text = f"{text} (optional)"
        prop["description"] = text
        if not spec.required and spec.default not in (None, ""):
            prop["default"] = spec.default
        properties[spec.name] = prop
    properties["task_instruction"] = {"type": "string", "description": TASK_INSTRUCTION_HELP}
    return {"type": "function", "function": {
        "name": agent_cls.agent_name(), "description": description,
        "parameters": {"type": "object", "properties": properties, "required": [], "additionalProperties": False}}}


class AgentTool:
    """An agent class, callable by the LLM like any tool."""

    is_agent = True

    def __init__(self, agent_cls: type[StandardAgent]) -> None:
        self.agent_cls = agent_cls
        self.name = agent_cls.agent_name()
        self._schema = agent_tool_schema(agent_cls)

    def schema(self) -> dict[str, Any]:
        return self._schema

    @property
    def schema_version(self) -> str:
        return schema_version(self.agent_cls)

    async def invoke(self, arguments: dict[str, Any], context: ToolExecutionContext) -> ToolOutcome:
        agent = self.agent_cls(context=context)
        result = await agent.start(arguments if isinstance(arguments, dict) else {})
        if not result.status.waiting:
            return finished_outcome(result)
        config = loop_config(context)
        try:
            entry = await sync_to_async(_park)(agent=agent, context=context, config=config)
        except LimitReached as exc:
            return ToolOutcome(content=f"Error: {self.name} could not wait for the user's answer: {exc.message}",
                               is_error=True, status="ERROR")
        approval = await open_approval(agent, entry_id=entry.id, tool_call_id=context.tool_call_id, context=context)
        return waiting_outcome(agent, result, entry_id=str(entry.id), tool_call_id=context.tool_call_id,
                               approval=approval)

    def __repr__(self) -> str:
        return f"<AgentTool {self.name}>"


def _park(*, agent: StandardAgent, context: ToolExecutionContext, config: ReactLoopConfig) -> Any:
    from pool.services import pool_entry_create

    return pool_entry_create(owner_id=context.tenant_id, conversation_id=context.conversation_id,
                             run_id=context.run_id or None, tool_call_id=context.tool_call_id,
                             agent_type=agent.agent_name(), schema_version=schema_version(type(agent)),
                             snapshot=agent.snapshot(), ttl_minutes=config.agent_pool_ttl_minutes,
                             max_per_tenant=config.max_agents_per_tenant)


async def open_approval(agent: StandardAgent, *, entry_id: Any, tool_call_id: str,
                        context: ToolExecutionContext) -> dict[str, Any] | None:
    """A structured approval request (``approvals`` app) for an agent that waits for approval."""
    if agent.status != AgentStatus.WAITING_FOR_APPROVAL:
        return None
    from approvals.services import approval_request_open

    request = await sync_to_async(approval_request_open)(
        owner_id=context.tenant_id, agent=agent, conversation_id=context.conversation_id, pool_entry_id=entry_id,
        run_id=context.run_id or None, tool_call_id=tool_call_id, source=context.source,
        timeout_minutes=loop_config(context).approval_timeout_minutes)
    return request.as_pending()


def finished_outcome(result: AgentResult) -> ToolOutcome:
    """A completed, failed or declined agent, as the tool result the LLM reads."""
    if result.status == AgentStatus.ERROR:
        return ToolOutcome(content=f"Error: {result.message}", is_error=True, status="ERROR")
    return ToolOutcome(content=result.message, status=result.status.name)


def waiting_outcome(agent: StandardAgent, result: AgentResult, *, entry_id: str, tool_call_id: str,
                    approval: dict[str, Any] | None = None) -> ToolOutcome:
    """The tool result (kept in the history) and the interruption for a parked agent."""
    name = agent.agent_name()
    approvals: list[dict[str, Any]] = []
    if result.status == AgentStatus.WAITING_FOR_APPROVAL:
        summary, details = agent.approval_summary()
        approvals.append(approval or {"agent_name": name, "action_summary": summary, "details": details,
                                      "pool_entry": entry_id, "tool_call_id": tool_call_id})
        run_status, note = RunStatus.WAITING_FOR_APPROVAL, "waiting for the user's confirmation"
    else:
        run_status, note = RunStatus.WAITING_FOR_INPUT, "waiting for the user's input"
    interruption = Interruption(status=run_status, prompt=result.message, tool_call_id=tool_call_id, agent_name=name,
                                pending_approvals=approvals,
                                data={"pool_entry": entry_id, "asking": [s.name for s in agent.to_ask()]})
    return ToolOutcome(content=f"{name} is {note}. It asked: {result.message}", status=result.status.name,
                       interruption=interruption)


# --- resuming from the pool ----------------------------------------------------------------


@dataclass(slots=True)
class AgentFinished:
    """Paused agent(s) finished: the pair to append to the history, and the telemetry."""

    messages: list[dict[str, Any]]
    records: list[ToolCallRecord] = field(default_factory=list)


@dataclass(slots=True)
class AgentStillWaiting:
    """Still waiting after the user's message; ``phrase`` when the prompt is an agent's own question.

    A resumed agent's next question is rephrased in the persona's voice like the loop's
    (``ReactLoop.phrase_question``); the framework's own re-ask of an unclear approval
    answer (``approvals.chat``) is not, since it carries links and exact answer words.
    """

    interruption: Interruption
    records: list[ToolCallRecord] = field(default_factory=list)
    phrase: bool = False


@dataclass(slots=True)
class ResumeStep:
    call_id: str
    name: str
    arguments: dict[str, Any]
    outcome: ToolOutcome
    duration_ms: int = 0


def wants_to_cancel(text: str) -> bool:
    """"never mind", "cancel", "stop"...: the user drops the paused task."""
    return bool(_CANCEL.match(text))


def agent_class_for(tools: ToolRegistry, agent_type: str) -> type[StandardAgent] | None:
    tool = tools.get(agent_type)
    if isinstance(tool, AgentTool):
        return tool.agent_cls
    return agent_registry.get(agent_type)


async def resume_pending_agent(*, text: str, context: ToolExecutionContext, tools: ToolRegistry,
                               emit: EventSink) -> AgentFinished | AgentStillWaiting | None:
    """Give the message to the conversation's oldest paused agent; None when there is none.

    A cancel phrase drops every paused agent of the conversation and lets the message go
    to the loop. Otherwise the reply is routed for the claimed agent only: a new request or
    a cancellation drops that agent (the loop then answers the message), an answer reaches
    it with the values the routing call extracted. Entries another process claimed, or
    that cannot be restored (schema changed), are skipped.
    """
    from approvals.chat import answer_pending_approvals
    from pool import selectors, services
    from pool.models import AgentPoolEntry

    answered = await answer_pending_approvals(text=text, context=context, tools=tools, emit=emit)
    if answered is not None:
        return answered
    # An agent waiting for approval is decided only through ``approvals.services.approval_decide``.
    entries = [entry for entry in await sync_to_async(selectors.pending_for_conversation)(
        owner_id=context.tenant_id, conversation_id=context.conversation_id)
        if entry.status != AgentPoolEntry.Status.WAITING_FOR_APPROVAL]
    if not entries:
        return None
    if wants_to_cancel(text):
        steps = []
        for entry in entries:
            if await sync_to_async(services.pool_entry_cancel)(entry_id=entry.id, owner_id=entry.owner_id):
                steps.append(ResumeStep(_resume_call_id(entry), entry.agent_type, entry.collected_fields,
                                   ToolOutcome(content=CANCELLED_NOTE, status="CANCELLED")))
        return await finish_resumed(steps, context, emit) if steps else None
    for entry in entries:
        claimed = await sync_to_async(services.pool_entry_resume)(entry_id=entry.id, owner_id=entry.owner_id)
        if claimed is None:
            continue
        call_id = _resume_call_id(claimed)
        agent = await sync_to_async(services.pool_entry_restore)(
            entry=claimed, agent_cls=agent_class_for(tools, claimed.agent_type), context=context.for_call(call_id))
        if agent is None:
            continue
        routed = await _route(agent, text, context)
        if routed.intent != ReplyIntent.ANSWER:
            return await _drop_routed(claimed, call_id, routed.intent, context, emit)
        return await _continue_agent(agent, claimed, text, call_id, context, emit, values=routed.values)
    return None


async def _route(agent: StandardAgent, text: str, context: ToolExecutionContext) -> RoutedReply:
    """The routing decision for an agent waiting for input; an answer when routing is off.

    An agent waiting for approval is never routed: its yes/no has its own parser and door.
    """
    if agent.status != AgentStatus.WAITING_FOR_INPUT or not loop_config(context).route_agent_replies:
        return FALLBACK
    from orchestrator.llm import LLMClient

    return await route_reply(agent, text, context.extra.get("llm") or LLMClient.from_settings())


async def _drop_routed(entry: Any, call_id: str, intent: ReplyIntent, context: ToolExecutionContext,
                       emit: EventSink) -> AgentFinished:
    """Remove the claimed agent; a note in the history tells the LLM the task was dropped."""
    from pool import services

    await sync_to_async(services.pool_entry_cancel)(entry_id=entry.id, owner_id=entry.owner_id)
    outcome = ToolOutcome(content=DROPPED_NOTES[intent], status="CANCELLED")
    return await finish_resumed([ResumeStep(call_id, entry.agent_type, entry.collected_fields, outcome)], context, emit)


async def _give_reply(agent: StandardAgent, text: str, values: dict[str, Any]) -> AgentResult:
    """The routed values when the routing call extracted some, else the agent's own parser.

    An agent class that overrides ``reply`` keeps its own reading of the text.
    """
    if values and agent.status == AgentStatus.WAITING_FOR_INPUT and type(agent).reply is StandardAgent.reply:
        agent.absorb(values)
        return await agent.advance()
    return await agent.reply(text)


async def _continue_agent(agent: StandardAgent, entry: Any, text: str, call_id: str, context: ToolExecutionContext,
                          emit: EventSink, *, values: dict[str, Any] | None = None
                          ) -> AgentFinished | AgentStillWaiting:
    from pool import services

    config = loop_config(context)
    await emit(ToolCallStart(run=context.run_id, turn=0, tool_call_id=call_id, name=agent.agent_name()))
    started = time.monotonic()
    try:
        result = await asyncio.wait_for(_give_reply(agent, text, values or {}), config.agent_tool_execution_timeout)
    except TimeoutError:
        result = AgentResult.error(f"{agent.agent_name()} timed out after {config.agent_tool_execution_timeout:g} s.")
    except Exception as exc:  # a crashed agent must not crash the run; the LLM explains
        logger.warning("agent %s failed on resume", agent.agent_name(), exc_info=True)
        result = AgentResult.error(f"{agent.agent_name()} failed: {type(exc).__name__}: {exc}")
    duration_ms = int((time.monotonic() - started) * 1000)
    if result.status.waiting:
        await sync_to_async(services.pool_entry_pause)(entry_id=entry.id, owner_id=entry.owner_id,
                                                       snapshot=agent.snapshot(),
                                                       ttl_minutes=config.agent_pool_ttl_minutes)
        approval = await open_approval(agent, entry_id=entry.id, tool_call_id=entry.tool_call_id, context=context)
        outcome = waiting_outcome(agent, result, entry_id=str(entry.id), tool_call_id=entry.tool_call_id,
                                  approval=approval)
        step = ResumeStep(call_id, agent.agent_name(), agent.fields, outcome, duration_ms)
        await _emit_result(step, context, emit)
        interruption = outcome.interruption
        assert interruption is not None
        await emit(StateChange(run=context.run_id, state=str(interruption.status), prompt=interruption.prompt,
                               agent=interruption.agent_name, pending_approvals=interruption.pending_approvals))
        return AgentStillWaiting(interruption=interruption, records=[_record(step, config)], phrase=True)
    await sync_to_async(services.pool_entry_remove)(entry_id=entry.id, owner_id=entry.owner_id)
    step = ResumeStep(call_id, agent.agent_name(), agent.fields, finished_outcome(result), duration_ms)
    return await finish_resumed([step], context, emit)


async def finish_resumed(steps: list[ResumeStep], context: ToolExecutionContext, emit: EventSink) -> AgentFinished:
    """One assistant message calling the agent(s) with their final fields, then each result.

    Appended after the user's reply this keeps the history valid for the API (every tool
    result follows the assistant message that called it) and shows the LLM, in order,
    what the agent did with the answer.
    """
    config = loop_config(context)
    calls = [{"id": s.call_id, "type": "function",
              "function": {"name": s.name, "arguments": json.dumps(s.arguments, default=str)}} for s in steps]
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": calls}]
    for step in steps:
        step.outcome.content = _truncate(step.outcome.content, config)
        messages.append({"role": "tool", "tool_call_id": step.call_id, "content": step.outcome.content})
        await _emit_result(step, context, emit)
    return AgentFinished(messages=messages, records=[_record(s, config) for s in steps])


async def _emit_result(step: ResumeStep, context: ToolExecutionContext, emit: EventSink) -> None:
    await emit(ToolResultEvent(run=context.run_id, turn=0, tool_call_id=step.call_id, name=step.name,
                               success=not step.outcome.is_error, duration_ms=step.duration_ms,
                               result_status=step.outcome.status, preview=step.outcome.content[:200]))


def _record(step: ResumeStep, config: ReactLoopConfig) -> ToolCallRecord:
    from orchestrator.loop import summarize_arguments

    return ToolCallRecord(tool_call_id=step.call_id, name=step.name,
                          args_summary=summarize_arguments(step.arguments, config.args_summary_chars),
                          duration_ms=step.duration_ms, success=not step.outcome.is_error,
                          result_status=step.outcome.status, result_chars=len(step.outcome.content), turn=0)


def _truncate(content: str, config: ReactLoopConfig) -> str:
    from orchestrator.context import ContextManager

    return ContextManager(config).truncate_tool_result(content)


def _resume_call_id(entry: Any) -> str:
    return f"resume_{entry.id.hex}"
