"""Writes of the triggers app: trigger tasks and their beat schedules, always in step.

Every change to a ``TriggerTask`` goes through these functions — REST, the admin, the
assistant's tools and tests alike — and each one updates the task and its
``PeriodicTask`` in one transaction (``triggers.schedules`` does the beat side), so beat
never fires a schedule the user already changed, paused or deleted. All are owner-scoped:
another user's task is ``NotFound``.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from onevalet_site.errors import Conflict, InvalidInput
from orchestrator.models import UserProfile
from triggers import schedules
from triggers.channels import validate_output
from triggers.conditions import validate_condition
from triggers.executors import get_executor
from triggers.filters import validate_filter
from triggers.models import TriggerTask
from triggers.selectors import trigger_task_get

MIN_INTERVAL_SECONDS = 10
DEFAULT_POLL_SECONDS = 300
# A one-time task may be created a little in the past (clock skew, "in 0 minutes"); beat
# fires a past clocked schedule at once.
ONE_TIME_PAST_TOLERANCE = timedelta(minutes=2)

EDITABLE_FIELDS = (
    "name", "executor", "action", "output", "cron", "interval_seconds", "run_at", "missed_run_policy",
    "event_source", "event_type", "event_filter", "condition", "cooldown_seconds",
)


def user_timezone(owner_id: int) -> str:
    """The owner's time zone (``UserProfile.timezone``), UTC when they have no profile."""
    return UserProfile.objects.filter(user_id=owner_id).values_list("timezone", flat=True).first() or "UTC"


def _validate(task: TriggerTask) -> None:
    """Check the task as a whole before it is saved; raise ``InvalidInput`` naming the field."""
    task.name = (task.name or "").strip()[:200]
    if not task.name:
        raise InvalidInput("a trigger needs a name", code="invalid_name")
    if task.kind not in TriggerTask.Kind.values:
        raise InvalidInput(f"unknown kind {task.kind!r}; use {', '.join(TriggerTask.Kind.values)}", code="invalid_kind")
    if task.missed_run_policy not in TriggerTask.MissedRunPolicy.values:
        raise InvalidInput(f"unknown missed_run_policy {task.missed_run_policy!r}", code="invalid_policy")
    if not isinstance(task.action, dict):
        raise InvalidInput('"action" must be an object', code="invalid_action")
    get_executor(task.executor).validate(task.action)
    task.output = validate_output(task.output)
    try:
        zoneinfo.ZoneInfo(task.timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(f"unknown time zone {task.timezone!r}", code="invalid_timezone") from None
    _validate_kind(task)


def _validate_kind(task: TriggerTask) -> None:
    kind = TriggerTask.Kind
    if task.kind == kind.CRON:
        schedules.parse_cron(task.cron)
    if task.kind == kind.CONDITION:
        task.condition = validate_condition(task.condition)
        task.interval_seconds = task.interval_seconds or DEFAULT_POLL_SECONDS
    if task.kind in (kind.INTERVAL, kind.CONDITION):
        if not task.interval_seconds or task.interval_seconds < MIN_INTERVAL_SECONDS:
            raise InvalidInput(f"the interval must be at least {MIN_INTERVAL_SECONDS} seconds", code="invalid_interval")
    if task.kind == kind.ONE_TIME:
        if not isinstance(task.run_at, datetime) or timezone.is_naive(task.run_at):
            raise InvalidInput("a one-time trigger needs run_at with a time zone", code="invalid_run_at")
        if task.pk is None and task.run_at < timezone.now() - ONE_TIME_PAST_TOLERANCE:
            raise InvalidInput("run_at is in the past", code="invalid_run_at")
    if task.kind == kind.EVENT:
        if not task.event_type.strip():
            raise InvalidInput("an event trigger needs an event_type", code="invalid_event")
        validate_filter(task.event_filter or {})


@transaction.atomic
def trigger_task_create(*, owner_id: int, name: str, kind: str, action: dict[str, Any] | None = None,
                        executor: str = "orchestrator", output: dict[str, Any] | None = None, cron: str = "",
                        interval_seconds: int | None = None, run_at: datetime | None = None,
                        missed_run_policy: str = TriggerTask.MissedRunPolicy.RUN_ONCE, event_source: str = "",
                        event_type: str = "", event_filter: dict[str, Any] | None = None,
                        condition: dict[str, Any] | None = None, cooldown_seconds: int = 3600,
                        timezone_name: str | None = None) -> TriggerTask:
    """Create a task and its schedule. The crontab carries the owner's time zone."""
    task = TriggerTask(
        owner_id=owner_id, name=name, kind=kind, action=action or {}, executor=executor, output=output or {},
        cron=cron.strip(), interval_seconds=interval_seconds, run_at=run_at, missed_run_policy=missed_run_policy,
        event_source=event_source, event_type=event_type, event_filter=event_filter or {},
        condition=condition or {}, cooldown_seconds=cooldown_seconds,
        timezone=timezone_name or user_timezone(owner_id))
    _validate(task)
    task.save()
    schedules.sync_periodic_task(task)
    _refresh_next_run(task)
    return task


@transaction.atomic
def trigger_task_update(*, owner_id: int, task_id: int, **changes: Any) -> TriggerTask:
    """Change fields of a task; the schedule follows. Re-reads the owner's time zone."""
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise InvalidInput(f"cannot change {', '.join(sorted(unknown))}", code="invalid_field")
    task = trigger_task_get(owner_id=owner_id, task_id=task_id, for_update=True)
    for key, value in changes.items():
        setattr(task, key, value)
    if task.kind == TriggerTask.Kind.CRON:
        task.timezone = user_timezone(owner_id)
    if "condition" in changes:
        task.last_state = None  # a new condition starts from "unknown", not the old one's state
    _validate(task)
    task.save()
    schedules.sync_periodic_task(task)
    _refresh_next_run(task)
    return task


@transaction.atomic
def trigger_task_pause(*, owner_id: int, task_id: int) -> TriggerTask:
    """Stop firing (the ``PeriodicTask`` is disabled); idempotent."""
    task = trigger_task_get(owner_id=owner_id, task_id=task_id, for_update=True)
    if task.status in (TriggerTask.Status.COMPLETED, TriggerTask.Status.EXPIRED):
        raise Conflict(f"the task is {task.status}; it cannot be paused", code="task_finished")
    return _set_status(task, TriggerTask.Status.PAUSED)


@transaction.atomic
def trigger_task_resume(*, owner_id: int, task_id: int) -> TriggerTask:
    """Fire again from now on; a paused one-time task whose time passed is refused."""
    task = trigger_task_get(owner_id=owner_id, task_id=task_id, for_update=True)
    if task.status in (TriggerTask.Status.COMPLETED, TriggerTask.Status.EXPIRED):
        raise Conflict(f"the task is {task.status}; create a new one instead", code="task_finished")
    if task.kind == TriggerTask.Kind.ONE_TIME and task.run_at and task.run_at < timezone.now():
        raise Conflict("its time has passed; set a new run_at to resume it", code="run_at_passed")
    if task.is_schedule and task.status == TriggerTask.Status.PAUSED:
        # Slots that passed while paused were not missed: start counting from now.
        task.last_run_at = timezone.now()
        task.save(update_fields=["last_run_at", "updated_at"])
    return _set_status(task, TriggerTask.Status.ACTIVE)


@transaction.atomic
def trigger_task_delete(*, owner_id: int, task_id: int) -> None:
    task = trigger_task_get(owner_id=owner_id, task_id=task_id, for_update=True)
    schedules.delete_periodic_task(task)
    task.delete()


def _set_status(task: TriggerTask, status: str) -> TriggerTask:
    task.status = status
    task.save(update_fields=["status", "updated_at"])
    schedules.set_enabled(task, status == TriggerTask.Status.ACTIVE)
    _refresh_next_run(task)
    return task


def _refresh_next_run(task: TriggerTask) -> None:
    task.next_run_at = schedules.next_run_estimate(task)
    task.save(update_fields=["next_run_at"])


def trigger_task_finish(*, task: TriggerTask, status: str) -> None:
    """End a task for good (a one-time task fired, or expired): status set, schedule off."""
    _set_status(task, status)


def trigger_task_conversation(*, task: TriggerTask) -> str:
    """The task's own conversation, created on first use and remembered on the task.

    Runs of one task share it, so "compare with yesterday" works; the conditional update
    keeps two concurrent first runs from creating two conversations.
    """
    from orchestrator.services import conversation_create

    if task.conversation_id:
        return str(task.conversation_id)
    with transaction.atomic():
        conversation = conversation_create(owner_id=task.owner_id, title=f"Trigger: {task.name}")
        claimed = TriggerTask.objects.filter(pk=task.pk, conversation__isnull=True).update(conversation=conversation)
        if not claimed:
            conversation.delete()
    task.conversation_id = TriggerTask.objects.values_list("conversation_id", flat=True).get(pk=task.pk)
    return str(task.conversation_id)
