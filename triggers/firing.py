"""One firing, exactly once: claim a run row, execute outside any transaction, record, notify.

The claim is the ``INSERT`` of a ``TriggerRun`` whose ``(task, run_key)`` is unique: the
database, not a question to live workers, decides who runs a firing. A message delivered
twice (a second beat, a redelivery after a worker died) finds the row: if that run is
finished, nothing happens; if it is ``running`` and its heartbeat stopped longer than a
lease ago, its worker is dead and this delivery takes it over with a conditional
``UPDATE``; if the heartbeat is fresh the caller retries later (the worker may be alive).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone

from triggers.channels import notify
from triggers.conditions import describe, evaluate
from triggers.executors import ActionResult, TriggerContext, get_executor
from triggers.models import TriggerRun, TriggerTask
from triggers.schedules import slot_key
from triggers.services import trigger_task_finish

logger = logging.getLogger("onevalet.triggers")

RUN_LEASE = timedelta(seconds=int(getattr(settings, "TRIGGERS_RUN_LEASE_SECONDS", 60)))
FIRING_STATUSES = (TriggerTask.Status.ACTIVE, TriggerTask.Status.PENDING_APPROVAL)


class FireOutcome(StrEnum):
    DONE = "done"          # this call executed the firing
    DUPLICATE = "duplicate"  # someone already did (or is doing) it
    BUSY = "busy"          # a run holds the key with a fresh heartbeat: retry after a lease
    INACTIVE = "inactive"  # the task is paused, finished or gone


@dataclass(slots=True)
class FireRequest:
    task_id: int
    run_key: str
    scheduled_for: datetime
    trigger_type: str = "schedule"
    payload: dict[str, Any] = field(default_factory=dict)
    late: bool = False


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _claim(request: FireRequest, task: TriggerTask) -> tuple[FireOutcome, TriggerRun | None]:
    now = timezone.now()
    try:
        with transaction.atomic():
            run = TriggerRun.objects.create(
                task=task, owner_id=task.owner_id, run_key=request.run_key, scheduled_for=request.scheduled_for,
                trigger_type=request.trigger_type, payload=request.payload, late=request.late,
                status=TriggerRun.Status.RUNNING, worker=worker_name(), started_at=now, heartbeat_at=now)
        return FireOutcome.DONE, run
    except IntegrityError:
        pass
    run = TriggerRun.objects.get(task=task, run_key=request.run_key)
    if run.status != TriggerRun.Status.RUNNING:
        return FireOutcome.DUPLICATE, None
    if run.heartbeat_at and run.heartbeat_at > now - RUN_LEASE:
        return FireOutcome.BUSY, None
    # The worker that held it stopped beating: take over, unless another delivery just did.
    taken = TriggerRun.objects.filter(pk=run.pk, status=TriggerRun.Status.RUNNING,
                                      heartbeat_at=run.heartbeat_at).update(
        worker=worker_name(), heartbeat_at=now, started_at=now, attempts=run.attempts + 1)
    if not taken:
        return FireOutcome.DUPLICATE, None
    dead_worker = run.worker
    run.refresh_from_db()
    logger.warning("trigger run %s: previous worker %s died, running it again", run.pk, dead_worker)
    return FireOutcome.DONE, run


class _Heartbeat:
    """Keeps ``heartbeat_at`` fresh while an execution runs, from a thread of its own."""

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"trigger-heartbeat-{run_id}", daemon=True)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(RUN_LEASE.total_seconds() / 4):
                try:
                    TriggerRun.objects.filter(pk=self.run_id, status=TriggerRun.Status.RUNNING).update(
                        heartbeat_at=timezone.now())
                except DatabaseError:
                    # One failed beat ("database is locked", a dropped connection) must not end
                    # the heartbeat: a silent run looks dead after a lease and the reaper would
                    # start a second execution of a live one. Reconnect and beat again.
                    logger.warning("heartbeat of trigger run %s failed; retrying", self.run_id, exc_info=True)
                    connection.close()
        finally:
            connection.close()

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def trigger_fire(request: FireRequest) -> FireOutcome:
    """Fire a task once for ``request.run_key``; safe to call any number of times."""
    task = TriggerTask.objects.select_related("periodic_task").filter(pk=request.task_id).first()
    if task is None or (task.status not in FIRING_STATUSES and request.trigger_type != "manual"):
        return FireOutcome.INACTIVE
    outcome, run = _claim(request, task)
    if run is None:
        return outcome
    context = TriggerContext(task=task, run=run, trigger_type=request.trigger_type, payload=request.payload,
                             late=request.late)
    with _Heartbeat(run.pk):
        try:
            result = get_executor(task.executor).execute(context)
        except Exception as exc:  # an executor bug must still end the run and tell the user
            logger.exception("trigger %s run %s failed", task.pk, run.pk)
            result = ActionResult(status=TriggerRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}",
                                  output="The task failed with an internal error.")
    close_old_connections()
    _finish(task, run, result, late=request.late)
    return FireOutcome.DONE


@transaction.atomic
def _finish(task: TriggerTask, run: TriggerRun, result: ActionResult, *, late: bool) -> None:
    """Record the outcome, move the task's status, notify — one transaction."""
    task = TriggerTask.objects.select_for_update(of=("self",)).select_related("periodic_task").get(pk=task.pk)
    run.status, run.finished_at = result.status, timezone.now()
    run.result, run.error = result.output, result.error[:5000]
    run.loop_run_id = result.loop_run_id
    run.save(update_fields=["status", "finished_at", "result", "error", "loop_run"])
    task.last_run_at = run.scheduled_for if task.last_run_at is None else max(task.last_run_at, run.scheduled_for)
    task.save(update_fields=["last_run_at", "updated_at"])
    if result.status == TriggerRun.Status.PENDING_APPROVAL:
        if task.status != TriggerTask.Status.PENDING_APPROVAL:
            task.status = TriggerTask.Status.PENDING_APPROVAL
            task.save(update_fields=["status", "updated_at"])
    elif task.kind == TriggerTask.Kind.ONE_TIME:
        trigger_task_finish(task=task, status=TriggerTask.Status.COMPLETED)
    elif task.status == TriggerTask.Status.PENDING_APPROVAL:
        task.status = TriggerTask.Status.ACTIVE  # a recurring task carries on after a clean run
        task.save(update_fields=["status", "updated_at"])
    if result.notify:
        notify(owner_id=task.owner_id, title=_title(task, result, late), body=_body(result, late),
               link=result.link, output=task.output, task_id=task.pk, run_id=run.pk,
               data={"trigger": task.pk, "run": run.pk, "status": result.status, "late": late, **result.data})


def _title(task: TriggerTask, result: ActionResult, late: bool) -> str:
    title = result.title or task.name
    if result.status == TriggerRun.Status.FAILED:
        title = f"{task.name}: failed"
    return f"{title} (late)" if late else title


def _body(result: ActionResult, late: bool) -> str:
    body = result.output or result.error
    if late:
        body = "This ran late: OneValet was not running at the scheduled time.\n\n" + body
    return body


def trigger_run_record_skipped(*, task: TriggerTask, scheduled_for: datetime, reason: str) -> TriggerRun | None:
    """A slot that will not run (skip policy, ask policy): recorded so history shows it."""
    try:
        with transaction.atomic():
            return TriggerRun.objects.create(
                task=task, owner_id=task.owner_id, run_key=slot_key(scheduled_for), scheduled_for=scheduled_for,
                status=TriggerRun.Status.SKIPPED, late=True, error=reason, finished_at=timezone.now())
    except IntegrityError:
        return None


def stale_runs() -> list[TriggerRun]:
    """Runs whose worker stopped beating (killed with the whole worker): to be re-fired."""
    return list(TriggerRun.objects.filter(status=TriggerRun.Status.RUNNING,
                                          heartbeat_at__lt=timezone.now() - RUN_LEASE))


def condition_poll(task_id: int) -> FireRequest | None:
    """Evaluate a condition task; return (and enqueue after commit) a firing on a rising edge.

    Fires only when the state goes from not-true to true and the cooldown since the last
    firing has passed; the state is stored either way, so a condition that stays true does
    not fire again until it has been false in between.
    """
    task = TriggerTask.objects.filter(pk=task_id, kind=TriggerTask.Kind.CONDITION,
                                      status=TriggerTask.Status.ACTIVE).first()
    if task is None:
        return None
    try:
        value, state = evaluate(task.condition, task.owner_id)  # slow I/O: before the transaction
    except Exception:
        logger.exception("condition check of trigger %s failed", task_id)
        return None
    now = timezone.now()
    with transaction.atomic():
        task = TriggerTask.objects.select_for_update(of=("self",)).get(pk=task.pk)
        cooled = task.last_fired_at is None or now - task.last_fired_at >= timedelta(seconds=task.cooldown_seconds)
        fire = bool(state) and not task.last_state and cooled
        task.last_state, task.last_value = bool(state), _json_safe(value)
        if fire:
            task.last_fired_at = now
        task.save(update_fields=["last_state", "last_value", "last_fired_at", "updated_at"])
        if not fire:
            return None
        request = FireRequest(task_id=task.pk, run_key=f"condition:{now.isoformat()}", scheduled_for=now,
                              trigger_type="condition",
                              payload={"value": _json_safe(value), "description": describe(task.condition, value)})
        transaction.on_commit(lambda: enqueue_fire(request))
    return request


def _json_safe(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def enqueue_fire(request: FireRequest) -> None:
    """Queue ``fire_trigger`` for a request (call after commit)."""
    from triggers.tasks import fire_trigger

    fire_trigger.apply_async(kwargs={
        "task_id": request.task_id, "run_key": request.run_key,
        "scheduled_for": request.scheduled_for.isoformat(), "trigger_type": request.trigger_type,
        "payload": request.payload, "late": request.late})


def trigger_task_run_now(*, owner_id: int, task_id: int) -> FireRequest:
    """Queue an extra, manual firing of the owner's task (the "ask" policy's answer)."""
    import uuid

    from triggers.selectors import trigger_task_get

    task = trigger_task_get(owner_id=owner_id, task_id=task_id)
    now = timezone.now()
    request = FireRequest(task_id=task.pk, run_key=f"manual:{uuid.uuid4().hex}", scheduled_for=now,
                          trigger_type="manual")
    transaction.on_commit(lambda: enqueue_fire(request))
    return request
