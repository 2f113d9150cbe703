"""Missed runs: what was due while OneValet was down, handled by each task's policy.

Run at start-up (``manage.py catch_up_triggers``, before beat starts) so the policy decides,
not beat: beat alone would fire an overdue crontab at once, unmarked. For each active
schedule task whose last due time passed unrun, ``missed_run_policy`` says:

* ``run_once`` — fire the latest missed slot once, marked late (several missed slots of a
  daily task are one late run, not a burst);
* ``skip`` — record a skipped run so the history shows the gap;
* ``ask`` — record it skipped and ask the user whether to run it now.

Runs left ``running`` by a worker that died with its whole process are re-queued too; the
run-key claim lets exactly one delivery take them over. Beat also does that part every
minute (``requeue_stale_runs`` via ``reap_stale_runs``), so a worker killed while the server
keeps running does not wait for a restart.
"""

from __future__ import annotations

import logging
import zoneinfo
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from triggers import schedules
from triggers.channels import notify
from triggers.firing import FireRequest, enqueue_fire, stale_runs, trigger_run_record_skipped
from triggers.models import TriggerRun, TriggerTask
from triggers.selectors import schedule_tasks_active
from triggers.services import trigger_task_finish

logger = logging.getLogger("onevalet.triggers.catchup")

GRACE = timedelta(seconds=60)


@dataclass(slots=True)
class CatchUpReport:
    fired: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    asked: list[int] = field(default_factory=list)
    recovered_runs: list[int] = field(default_factory=list)


def catch_up(*, now: datetime | None = None, grace: timedelta = GRACE) -> CatchUpReport:
    now = now or timezone.now()
    report = CatchUpReport()
    for task in schedule_tasks_active():
        slot = schedules.last_missed_slot(task, now, grace)
        if slot is None or TriggerRun.objects.filter(task=task, run_key=schedules.slot_key(slot)).exists():
            continue
        _apply_policy(task, slot, now, report)
    report.recovered_runs = requeue_stale_runs()
    return report


def requeue_stale_runs() -> list[int]:
    """Queue a new delivery of every run whose worker stopped beating; the ids re-queued.

    A worker killed with its whole process group cannot reject its message, and Redis only
    redelivers an unacknowledged one after the broker's ``visibility_timeout`` (an hour), so
    this is what recovers such runs: at start-up (``catch_up``) and every minute from beat
    (``triggers.tasks.reap_stale_runs``). Queuing twice is harmless — the first delivery
    takes the run over and the next finds its heartbeat fresh (or the run finished).
    """
    recovered = []
    for run in stale_runs():
        enqueue_fire(FireRequest(task_id=run.task_id, run_key=run.run_key, scheduled_for=run.scheduled_for,
                                 trigger_type=run.trigger_type, payload=run.payload, late=run.late))
        recovered.append(run.pk)
    if recovered:
        logger.warning("re-queued %d trigger run(s) whose worker stopped: %s", len(recovered), recovered)
    return recovered


@transaction.atomic
def _apply_policy(task: TriggerTask, slot: datetime, now: datetime, report: CatchUpReport) -> None:
    task = TriggerTask.objects.select_for_update(of=("self",)).select_related("periodic_task").get(pk=task.pk)
    schedules.mark_beat_ran(task, now)  # beat must not fire the overdue slot on its own
    policy = task.missed_run_policy
    if policy == TriggerTask.MissedRunPolicy.RUN_ONCE:
        request = FireRequest(task_id=task.pk, run_key=schedules.slot_key(slot), scheduled_for=slot, late=True)
        transaction.on_commit(lambda: enqueue_fire(request))
        report.fired.append(task.pk)
        return
    reason = "missed while OneValet was not running" + ("; the user was asked" if policy == "ask" else "")
    run = trigger_run_record_skipped(task=task, scheduled_for=slot, reason=reason)
    task.last_run_at = slot
    task.save(update_fields=["last_run_at", "updated_at"])
    if policy == TriggerTask.MissedRunPolicy.ASK:
        local = slot.astimezone(zoneinfo.ZoneInfo(task.timezone))
        notify(owner_id=task.owner_id, title=f"Missed: {task.name}",
               body=f"“{task.name}” was due {local:%A %d %B, %H:%M} ({task.timezone}) while OneValet was not "
                    "running, so it did not run. Run it now?",
               link=f"/api/v1/triggers/{task.pk}/run", output=task.output, task_id=task.pk,
               run_id=run.pk if run else None,
               data={"trigger": task.pk, "action": "run_now", "missed": schedules.slot_key(slot)})
        report.asked.append(task.pk)
    else:
        report.skipped.append(task.pk)
    if task.kind == TriggerTask.Kind.ONE_TIME:
        trigger_task_finish(task=task, status=TriggerTask.Status.EXPIRED)
