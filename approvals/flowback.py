"""Feeding decided actions back into the conversation, and letting the ReAct loop finish.

When the last request of a batch (one run's approvals) has a result, the conversation is
continued by a new run with ``source="approval"``: its input is the stored history plus one
assistant message calling the agents with their final arguments and each call's result —
the same shape the pool uses for a resumed agent, so the history stays valid for the API.
The loop then runs to its final answer, which is streamed to the user's sockets (the
per-user event store) and stored as a notification.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import sync_to_async

from approvals import services
from approvals.signals import batch_resolved
from approvals.execution import ExecutedAction, as_action
from approvals.models import ApprovalRequest
from orchestrator.events import EventSink, ExecutionEnd
from orchestrator.models import Source
from orchestrator.orchestrator import MessageOutcome, Orchestrator

logger = logging.getLogger("onevalet.approvals")


def carried_messages(actions: list[ExecutedAction]) -> list[dict[str, Any]]:
    """One assistant message calling every decided agent with its final arguments, then each result."""
    calls = [{"id": a.call_id, "type": "function",
              "function": {"name": a.agent_name, "arguments": json.dumps(a.arguments, default=str)}} for a in actions]
    return [{"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": a.call_id, "content": a.content} for a in actions)]


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
    """A ``source="approval"`` run with no new user message: the history, then the decided
    actions' call and results, and the loop decides what to tell the user."""
    from orchestrator.locks import conversation_lock

    async with conversation_lock(conversation_id):
        prepared = await orchestrator.prepare_context(user_id=owner_id, content=None, conversation_id=conversation_id,
                                                      source=Source.APPROVAL,
                                                      carried_messages=carried_messages(actions))
        outcome = await orchestrator.run_prepared(prepared, emit, stream=False, pending_agents=False)
    await emit(ExecutionEnd(run=outcome.run_id, conversation=conversation_id, summary=outcome.as_dict()))
    return outcome


def _notify_done(*, owner_id: int, conversation_id: str, outcome: MessageOutcome,
                 requests: list[ApprovalRequest]) -> None:
    from notifications.services import notification_create

    summaries = "; ".join(f"{r.action_summary}: {r.get_outcome_display().lower()}" for r in requests)
    notification_create(owner_id=owner_id, title="Your approved actions finished", body=outcome.result.response,
                        link=f"/chat/?conversation={conversation_id}", source="approval",
                        data={"conversation": conversation_id, "run": outcome.run_id, "summary": summaries,
                              "approvals": [str(r.id) for r in requests]})
