"""The chat door: a user's message while approvals of the conversation are pending.

One pending request: "yes" / "no" (the agent's own ``parse_approval``) or a cancel phrase.
Several: one structured LLM call maps the reply to a decision per request. Anything
unclear asks again — nothing is decided by guessing. Decisions go through
``approval_decide(channel="chat")`` like every other door; the actions then run in this
very message (the conversation lock is held), and their results continue the loop.

Only a person's message decides: runs started by a trigger or by an approval continuation
never reach this door, so neither a schedule nor the LLM can approve anything.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import sync_to_async

from approvals import services
from approvals.execution import approval_execute
from approvals.models import ApprovalRequest
from approvals.selectors import list_pending_approvals
from onevalet_site.errors import Conflict, InvalidInput
from orchestrator.agent_tools import (AgentFinished, AgentStillWaiting, finish_resumed, ResumeStep, agent_class_for,
                                      loop_config, wants_to_cancel)
from orchestrator.events import EventSink, StateChange
from orchestrator.tools import ToolExecutionContext, ToolRegistry
from orchestrator.types import Interruption, RunStatus, ToolOutcome

logger = logging.getLogger("onevalet.approvals")

PERSON_SOURCES = frozenset({"web", "api", "cli"})
Decisions = dict[str, tuple[str, dict[str, Any] | None]]
MAPPER_PROMPT = (
    "You map a user's reply to the approval requests it answers. Call record_decisions once, with one entry per "
    "request: approve, edit (with only the fields the user asked to change, in 'changes'), cancel, or unclear. "
    "Use unclear whenever the reply does not plainly decide that request; never guess.")
MAPPER_TOOL = {"type": "function", "function": {
    "name": "record_decisions", "description": "Record the user's decision for each approval request.",
    "parameters": {"type": "object", "required": ["decisions"], "properties": {"decisions": {
        "type": "array", "items": {"type": "object", "required": ["request", "decision"], "properties": {
            "request": {"type": "integer", "description": "The request's number"},
            "decision": {"type": "string", "enum": ["approve", "edit", "cancel", "unclear"]},
            "changes": {"type": "object", "description": "Edited fields (edit only)"}}}}}}}}


async def answer_pending_approvals(*, text: str, context: ToolExecutionContext, tools: ToolRegistry,
                                   emit: EventSink) -> AgentFinished | AgentStillWaiting | None:
    """Decide the conversation's pending approvals from the user's reply; None when there are none."""
    if context.source not in PERSON_SOURCES:
        return None
    pending = await sync_to_async(list_pending_approvals)(context.tenant_id, conversation_id=context.conversation_id)
    if not pending:
        return None
    if wants_to_cancel(text):
        decisions: Decisions | None = {str(r.id): ("cancel", None) for r in pending}
    elif len(pending) == 1:
        decisions = await _single(text, pending[0], tools)
    else:
        decisions = await _several(text, pending, context)
    if decisions is None:
        return await _ask_again(pending, context, emit, "I could not tell what you decided.")
    try:
        decided = await _decide_all(decisions, pending, context, tools)
    except InvalidInput as exc:
        return await _ask_again(pending, context, emit, f"That change cannot be used: {exc.message}")
    if not decided:
        return None  # decided elsewhere meanwhile: the message is an ordinary one
    return await _execute(decided, context, tools, emit)


async def _single(text: str, request: ApprovalRequest, tools: ToolRegistry) -> Decisions | None:
    agent_cls = agent_class_for(tools, request.agent_name)
    if agent_cls is None:
        return None
    decision = await agent_cls().parse_approval(text)
    if decision is None:
        return None
    return {str(request.id): (str(decision), None)}


async def _several(text: str, pending: list[ApprovalRequest], context: ToolExecutionContext) -> Decisions | None:
    """One structured LLM call; any request left unclear (or a malformed answer) means: ask again."""
    from orchestrator.llm import LLMClient

    llm = context.extra.get("llm") or LLMClient.from_settings()
    listing = [{"request": n, "action": r.action_summary, "arguments": r.details, "editable_fields": r.editable_fields}
               for n, r in enumerate(pending, start=1)]
    messages = [{"role": "system", "content": MAPPER_PROMPT},
                {"role": "user", "content": f"Requests: {json.dumps(listing, default=str)}\n\nThe user's reply: {text}"}]
    try:
        response = await llm.complete(messages, [MAPPER_TOOL])
        raw = json.loads(response.tool_calls[0].arguments)["decisions"] if response.tool_calls else []
    except Exception:  # an unreadable mapping is an unclear reply, not an error for the user
        logger.warning("could not map a chat reply to approvals", exc_info=True)
        return None
    decisions: Decisions = {}
    for item in raw if isinstance(raw, list) else []:
        number = item.get("request") if isinstance(item, dict) else None
        if isinstance(number, int) and 1 <= number <= len(pending) and item.get("decision") in services.DECISIONS:
            changes = item.get("changes") if item.get("decision") == "edit" else None
            decisions[str(pending[number - 1].id)] = (item["decision"], changes or None)
    return decisions if len(decisions) == len(pending) else None


async def _decide_all(decisions: Decisions, pending: list[ApprovalRequest], context: ToolExecutionContext,
                      tools: ToolRegistry) -> list[str]:
    """Every decision through the one service; the ids this message won, in the requests' order."""
    won = []
    for request in pending:
        decision, changes = decisions[str(request.id)]
        if decision == "edit" and not changes:
            decision = "approve"
        try:
            await sync_to_async(services.approval_decide)(
                owner_id=context.tenant_id, request_id=request.id, decision=decision, changes=changes,
                channel=ApprovalRequest.Channel.CHAT, actor_id=context.tenant_id,
                agent_cls=agent_class_for(tools, request.agent_name), enqueue=False)
        except Conflict:
            continue
        won.append(str(request.id))
    return won


async def _execute(request_ids: list[str], context: ToolExecutionContext, tools: ToolRegistry,
                   emit: EventSink) -> AgentFinished:
    config = loop_config(context)
    steps = []
    for request_id in request_ids:  # in confirmation order, one after the other
        action = await approval_execute(request_id=request_id, tools=tools, credentials=context.credentials,
                                        config=config)
        if action is not None:
            steps.append(ResumeStep(action.call_id, action.agent_name, action.arguments,
                               ToolOutcome(content=action.content, is_error=action.is_error,
                                           status=action.outcome.upper())))
    # Their results continue this run; a later batch continuation must not feed them again.
    await sync_to_async(services.approvals_mark_fed_back)(request_ids=request_ids)
    return await finish_resumed(steps, context, emit)


async def _ask_again(pending: list[ApprovalRequest], context: ToolExecutionContext, emit: EventSink,
                     why: str) -> AgentStillWaiting:
    lines = [f"{why} Please answer for each request: approve, cancel, or what to change."]
    lines += [f"{n}. {r.action_summary} — /approvals/{r.id}/" for n, r in enumerate(pending, start=1)]
    if len(pending) == 1:
        lines[0] = f"{why} Please answer yes or no (or open the approval page to edit it)."
    interruption = Interruption(status=RunStatus.WAITING_FOR_APPROVAL, prompt="\n".join(lines),
                                agent_name=", ".join(r.agent_name for r in pending),
                                pending_approvals=[r.as_pending() for r in pending])
    await emit(StateChange(run=context.run_id, state=str(interruption.status), prompt=interruption.prompt,
                           agent=interruption.agent_name, pending_approvals=interruption.pending_approvals))
    return AgentStillWaiting(interruption=interruption)
