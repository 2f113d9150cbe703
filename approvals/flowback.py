"""Feeding decided actions back into the conversation, and letting the ReAct loop finish.

When the last request of a batch (one run's approvals) has a result, the conversation is
continued by a new run with ``source="approval"``: its input is the stored history plus one
assistant message calling the agents with their final arguments and each call's result —
the same shape the pool uses for a resumed agent, so the history stays valid for the API.
The loop then runs to its final answer, which is streamed to the user's sockets (the
per-user event store) and stored as a notification.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from approvals import services
from approvals.signals import batch_resolved
from approvals.execution import ExecutedAction, as_action
from approvals.models import ApprovalRequest
from orchestrator.events import EventSink, ExecutionEnd
from orchestrator.models import Conversation, LoopRun, Source, UserProfile
from orchestrator.orchestrator import MessageOutcome, Orchestrator, PreparedRun
from orchestrator.selectors import recent_history
from orchestrator.services import messages_for_llm
from orchestrator.tools import ToolExecutionContext

logger = logging.getLogger("onevalet.approvals")


@dataclass(slots=True)
class ContinuationStart:
    run_id: str
    history: list[dict[str, Any]]
    timezone: str
    display_name: str


def carried_messages(actions: list[ExecutedAction]) -> list[dict[str, Any]]:
    """One assistant message calling every decided agent with its final arguments, then each result."""
    calls = [{"id": a.call_id, "type": "function",
              "function": {"name": a.agent_name, "arguments": json.dumps(a.arguments, default=str)}} for a in actions]
    return [{"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": a.call_id, "content": a.content} for a in actions)]


@transaction.atomic
def continuation_start(*, owner_id: int, conversation_id: Any, model: str, history_limit: int) -> ContinuationStart:
    """Open the ``source="approval"`` run and load the history it continues (no new user message)."""
    conversation = Conversation.objects.get(id=conversation_id, owner_id=owner_id)
    profile, _ = UserProfile.objects.get_or_create(user_id=owner_id)
    run = LoopRun.objects.create(owner_id=owner_id, conversation=conversation, source=Source.APPROVAL, model=model)
    history = messages_for_llm(recent_history(conversation=conversation, limit=history_limit))
    return ContinuationStart(run_id=str(run.id), history=history, timezone=profile.timezone,
                             display_name=profile.display_name)


async def continue_after_approvals(*, run_id: Any, orchestrator: Orchestrator,
                                   emit: EventSink | None = None) -> MessageOutcome | None:
    """Continue the conversation of a finished batch, once; None when not this caller's to do.

    A batch in which nothing was decided by the user (everything expired) is not continued:
    the user was told by the expiry notification and the LLM has nothing new to read.
    """
    requests = await sync_to_async(services.approval_flowback_claim)(run_id=run_id)
    if not requests:
        return None
    if all(r.outcome == ApprovalRequest.Outcome.EXPIRED for r in requests):
        await sync_to_async(batch_resolved.send)(sender=ApprovalRequest, run_id=str(run_id), status="expired",
                                                 response="", continuation_run_id=None)
        return None
    first = requests[0]
    owner_id, conversation_id = first.owner_id, str(first.conversation_id)
    if emit is None:
        from orchestrator.event_store import sink_for

        emit = sink_for(owner_id, conversation_id)
    outcome = await _run_continuation(orchestrator, owner_id, conversation_id,
                                      [as_action(r) for r in requests], emit)
    await sync_to_async(_notify_done)(owner_id=owner_id, conversation_id=conversation_id, outcome=outcome,
                                      requests=requests)
    await sync_to_async(batch_resolved.send)(sender=ApprovalRequest, run_id=str(run_id),
                                             status=str(outcome.result.status), response=outcome.result.response,
                                             continuation_run_id=outcome.run_id)
    return outcome


async def _run_continuation(orchestrator: Orchestrator, owner_id: int, conversation_id: str,
                            actions: list[ExecutedAction], emit: EventSink) -> MessageOutcome:
    from orchestrator import services as run_services
    from orchestrator.locks import conversation_lock

    carried = carried_messages(actions)
    async with conversation_lock(conversation_id):
        start = await sync_to_async(continuation_start)(
            owner_id=owner_id, conversation_id=conversation_id, model=orchestrator.llm.model,
            history_limit=orchestrator.config.history_load_limit)
        tools = orchestrator.visible_tools()
        system = orchestrator.system_message(timezone_name=start.timezone, display_name=start.display_name,
                                             tools=tools)
        context = ToolExecutionContext(tenant_id=owner_id, conversation_id=conversation_id, run_id=start.run_id,
                                       timezone=start.timezone, source=Source.APPROVAL,
                                       credentials=orchestrator.credentials,
                                       extra={"thread_pool_size": orchestrator.config.tool_thread_pool_size,
                                              "loop_config": orchestrator.config})
        prepared = PreparedRun(user_id=owner_id, conversation_id=conversation_id, run_id=start.run_id,
                               source=Source.APPROVAL, messages=[system, *start.history, *carried],
                               tool_context=context, carried_messages=carried)
        try:
            result = await orchestrator.react_loop(prepared, emit, stream=False)
        except BaseException as exc:
            await asyncio.shield(sync_to_async(run_services.run_fail)(
                owner_id=owner_id, run_id=start.run_id, error=f"{type(exc).__name__}: {exc}"))
            raise
        await orchestrator.post_process(prepared, result)
    outcome = MessageOutcome(conversation_id=conversation_id, run_id=start.run_id, result=result)
    await emit(ExecutionEnd(run=start.run_id, conversation=conversation_id, summary=outcome.as_dict()))
    return outcome


def _notify_done(*, owner_id: int, conversation_id: str, outcome: MessageOutcome,
                 requests: list[ApprovalRequest]) -> None:
    from notifications.services import notification_create

    summaries = "; ".join(f"{r.action_summary}: {r.get_outcome_display().lower()}" for r in requests)
    notification_create(owner_id=owner_id, title="Your approved actions finished", body=outcome.result.response,
                        link=f"/chat/?conversation={conversation_id}", source="approval",
                        data={"conversation": conversation_id, "run": outcome.run_id, "summary": summaries,
                              "approvals": [str(r.id) for r in requests]})
