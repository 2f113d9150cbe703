"""Writes of the approvals app: open a request, decide it, claim and record its execution, expire.

Every state change is one conditional UPDATE with a row-count check, so concurrent doors
(web page, REST, chat, the expiry task) can race freely and exactly one of them wins. No
agent, LLM or SMTP work happens here: the action runs in ``approvals.execution``, after
the decision's transaction committed (``transaction.on_commit`` enqueues it).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from approvals.models import ApprovalDecisionAttempt, ApprovalRequest
from onevalet_site.errors import Conflict, InvalidInput, NotFound
from onevalet_site.system_tasks import system_task_schedule_sync
from orchestrator.agents import StandardAgent, agent_registry

logger = logging.getLogger("onevalet.approvals")

EXPIRY_TASK_NAME = "approvals: expire unanswered approvals"
EXPIRY_TASK = "approvals.tasks.expire_approvals"
EXPIRY_EVERY_MINUTES = 1
DECISIONS = {"approve": ApprovalRequest.Status.APPROVED, "edit": ApprovalRequest.Status.EDITED,
             "cancel": ApprovalRequest.Status.CANCELLED}
DECIDED = (ApprovalRequest.Status.APPROVED, ApprovalRequest.Status.EDITED, ApprovalRequest.Status.CANCELLED)
CANCELLED_RESULT = "User cancelled this action."
EXPIRED_RESULT = "The user did not answer the approval request in time; the action was not performed."


def arguments_hash(arguments: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the arguments (sorted keys, no whitespace)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def editable_fields_of(agent_cls: type[StandardAgent]) -> list[str]:
    """An agent may narrow what users can change with ``editable_fields``; by default every InputField."""
    declared = getattr(agent_cls, "editable_fields", None)
    names = [spec.name for spec in agent_cls.input_fields]
    return [name for name in declared if name in names] if declared is not None else names


def approval_request_open(*, owner_id: int, agent: StandardAgent, conversation_id: Any, pool_entry_id: Any,
                          run_id: Any, tool_call_id: str, source: str, timeout_minutes: int) -> ApprovalRequest:
    """Record what a paused agent will do once approved: its exact arguments and their hash."""
    summary, preview = agent.approval_summary()
    arguments = json.loads(json.dumps(agent.fields, default=str))
    return ApprovalRequest.objects.create(
        owner_id=owner_id, agent_name=agent.agent_name(), action_summary=summary[:300],
        details=arguments, preview=json.loads(json.dumps(preview, default=str)),
        options=list(ApprovalRequest.DEFAULT_OPTIONS), editable_fields=editable_fields_of(type(agent)),
        arguments_hash=arguments_hash(arguments), conversation_id=conversation_id, pool_entry_id=pool_entry_id,
        run_id=run_id or None, tool_call_id=tool_call_id, source=source,
        expires_at=timezone.now() + timedelta(minutes=timeout_minutes))


def validated_changes(request: ApprovalRequest, changes: Any,
                      agent_cls: type[StandardAgent] | None = None) -> dict[str, Any]:
    """The edited arguments, each change checked with the agent's own InputField validators."""
    if not isinstance(changes, dict) or not changes:
        raise InvalidInput("An edit needs at least one changed field.", code="no_changes")
    not_editable = sorted(set(changes) - set(request.editable_fields))
    if not_editable:
        raise InvalidInput(f"The field {not_editable[0]!r} cannot be changed.", code="not_editable",
                           details={"field": not_editable[0]})
    agent_cls = agent_cls or agent_registry.get(request.agent_name)
    if agent_cls is None:
        raise InvalidInput(f"{request.agent_name} is no longer available; it cannot be edited.", code="not_editable")
    specs = {spec.name: spec for spec in agent_cls.input_fields}
    final = dict(request.details)
    for name, value in changes.items():
        converted, problem = specs[name].check(value)
        if problem is not None:
            raise InvalidInput(f"{specs[name].label()}: {problem}", code="invalid_field",
                               details={"field": name, "problem": problem})
        final[name] = converted
    return json.loads(json.dumps(final, default=str))


def approval_decide(*, owner_id: int, request_id: Any, decision: str, changes: dict[str, Any] | None = None,
                    channel: str, actor_id: int | None = None, agent_cls: type[StandardAgent] | None = None,
                    enqueue: bool = True, now: datetime | None = None) -> ApprovalRequest:
    """Approve, edit or cancel one of the owner's pending requests — the one door behind every door.

    The change is a single conditional UPDATE (pending, unexpired, the owner's); 0 rows means
    another decision, the expiry or the clock won: ``Conflict``, or ``NotFound`` when the
    row is not the owner's. With ``enqueue`` the execution task is sent after commit; the
    chat door passes False and executes in the message it is handling.
    """
    request = _owned(owner_id, request_id)
    if decision not in DECISIONS:
        raise InvalidInput("decision must be approve, edit or cancel.", code="invalid_decision")
    if channel not in ApprovalRequest.Channel.values:
        raise InvalidInput(f"unknown channel {channel!r}.")
    if decision == "approve" and changes:
        raise InvalidInput("Use the edit decision to change fields.", code="changes_need_edit")
    final = validated_changes(request, changes, agent_cls) if decision == "edit" else dict(request.details)
    now = now or timezone.now()
    with transaction.atomic():
        won = ApprovalRequest.objects.filter(
            id=request.id, owner_id=owner_id, status=ApprovalRequest.Status.PENDING, expires_at__gt=now,
        ).update(status=DECISIONS[decision], decided_at=now, decided_by_id=actor_id, channel=channel,
                 final_arguments=final, final_hash=arguments_hash(final))
        if won:
            _attempt(request, decision, channel, changes, actor_id, accepted=True)
            if enqueue:
                transaction.on_commit(lambda: _enqueue_execution(request.id))
    if not won:
        current = ApprovalRequest.objects.get(id=request.id)
        reason = "expired" if current.status in (ApprovalRequest.Status.PENDING, ApprovalRequest.Status.EXPIRED) \
            else f"already {current.status}"
        _attempt(request, decision, channel, changes, actor_id, accepted=False, reason=reason)
        raise Conflict(f"This approval request is {reason}; nothing was changed.", code=f"approval_{reason.split()[-1]}")
    request.refresh_from_db()
    return request


def _owned(owner_id: int, request_id: Any) -> ApprovalRequest:
    try:
        return ApprovalRequest.objects.get(id=request_id, owner_id=owner_id)
    except (ApprovalRequest.DoesNotExist, ValidationError, ValueError, TypeError):
        raise NotFound("No such approval request.") from None  # a malformed id is as unknown as a missing one


def _attempt(request: ApprovalRequest, decision: str, channel: str, changes: Any, actor_id: int | None, *,
             accepted: bool, reason: str = "") -> None:
    ApprovalDecisionAttempt.objects.create(request_id=request.id, actor_id=actor_id, decision=decision,
                                           channel=channel, changes=changes if isinstance(changes, dict) else None,
                                           accepted=accepted, reason=reason)


def _enqueue_execution(request_id: Any) -> None:
    from approvals.tasks import execute_approved_action

    execute_approved_action.delay(str(request_id))


def approval_execution_claim(*, request_id: Any) -> ApprovalRequest | None:
    """Claim a decided request for execution; None when another worker (or the expiry) has it."""
    claimed = ApprovalRequest.objects.filter(id=request_id, status__in=DECIDED,
                                             execution_claimed_at__isnull=True).update(
        execution_claimed_at=timezone.now())
    return ApprovalRequest.objects.get(id=request_id) if claimed == 1 else None


def approval_execution_record(*, request_id: Any, outcome: str, result: str) -> None:
    """Store what the action did; the LLM reads ``result`` as the tool call's result."""
    ApprovalRequest.objects.filter(id=request_id, executed_at__isnull=True).update(
        executed_at=timezone.now(), outcome=outcome, result=result)


@dataclass(slots=True)
class ExpiredRequest:
    id: Any
    owner_id: int
    pool_entry_id: Any
    run_id: Any
    action_summary: str


def approvals_expire(*, now: datetime | None = None) -> list[ExpiredRequest]:
    """Mark pending requests past their expiry expired, one conditional UPDATE each.

    A decision racing with this loses or wins on the same ``status='pending'`` condition,
    so a request is either decided or expired, never both.
    """
    now = now or timezone.now()
    expired: list[ExpiredRequest] = []
    candidates = ApprovalRequest.objects.filter(status=ApprovalRequest.Status.PENDING, expires_at__lte=now)
    for request in candidates.only("id", "owner_id", "pool_entry_id", "run_id", "action_summary"):
        won = ApprovalRequest.objects.filter(id=request.id, status=ApprovalRequest.Status.PENDING,
                                             expires_at__lte=now).update(
            status=ApprovalRequest.Status.EXPIRED, decided_at=now, channel=ApprovalRequest.Channel.SYSTEM,
            execution_claimed_at=now, executed_at=now, outcome=ApprovalRequest.Outcome.EXPIRED, result=EXPIRED_RESULT)
        if won:
            expired.append(ExpiredRequest(request.id, request.owner_id, request.pool_entry_id, request.run_id,
                                          request.action_summary))
    return expired


def approvals_recover_unexecuted(*, older_than: timedelta = timedelta(minutes=5)) -> list[str]:
    """Decided requests nobody claimed (the enqueue was lost with its process): enqueue them again.

    A claimed-but-unfinished one is never retried: the action may have run, and it must
    run at most once.
    """
    stale = ApprovalRequest.objects.filter(status__in=DECIDED, execution_claimed_at__isnull=True,
                                           decided_at__lt=timezone.now() - older_than)
    ids = [str(pk) for pk in stale.values_list("id", flat=True)]
    for request_id in ids:
        _enqueue_execution(request_id)
    return ids


def approval_flowback_claim(*, run_id: Any) -> list[ApprovalRequest] | None:
    """The requests of a finished batch, claimed for the conversation's continuation; else None.

    A batch is finished when every request of the run has a result. The claim is one
    UPDATE over the batch: the worker whose UPDATE covers every row continues the
    conversation; a concurrent one gets 0 rows.
    """
    batch = ApprovalRequest.objects.filter(run_id=run_id)
    total = batch.count()
    if not total or batch.filter(executed_at__isnull=True).exists():
        return None
    claimed = batch.filter(flowback_at__isnull=True).update(flowback_at=timezone.now())
    if claimed != total:
        return None
    return list(batch.order_by("created_at"))


def approvals_mark_fed_back(*, request_ids: list[Any]) -> int:
    """Requests whose results already continued a run (the chat door): no batch continuation repeats them."""
    return ApprovalRequest.objects.filter(id__in=request_ids, flowback_at__isnull=True).update(
        flowback_at=timezone.now())


def approvals_cancel_for_conversation(*, owner_id: int, conversation_id: Any, channel: str) -> list[ApprovalRequest]:
    """Cancel every pending request of a conversation ("never mind" in chat); the ones this call won."""
    won = []
    for request_id in ApprovalRequest.objects.filter(owner_id=owner_id, conversation_id=conversation_id,
                                                     status=ApprovalRequest.Status.PENDING).values_list("id", flat=True):
        try:
            won.append(approval_decide(owner_id=owner_id, request_id=request_id, decision="cancel", channel=channel,
                                       actor_id=owner_id, enqueue=False))
        except Conflict:
            continue
    return won


def approval_expiry_schedule_sync() -> None:
    """Create or update this one system task's beat schedule, by name; users' tasks are untouched."""
    system_task_schedule_sync(name=EXPIRY_TASK_NAME, task=EXPIRY_TASK, every=EXPIRY_EVERY_MINUTES,
                              description="Expires unanswered approval requests and drops their agents.")
