"""The bridge to django-celery-beat: the only code that writes a trigger's ``PeriodicTask``.

Beat's ``DatabaseScheduler`` reloads its schedule when ``PeriodicTasks.last_update`` moves,
which django-celery-beat's signals do on every model ``save()``/``delete()`` — so rows are
always saved one by one here, never with ``QuerySet.update()`` (which sends no signal and
would leave a running beat firing an old schedule).

Also here: the schedule arithmetic the rest of the app needs, done with the very schedule
objects beat uses (celery's crontab with the row's time zone), so "when was this due" means
the same thing to beat, ``fire_trigger`` and the catch-up command.
"""

from __future__ import annotations

import json
import zoneinfo
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import TYPE_CHECKING, Any

from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask

from onevalet_site.errors import InvalidInput
from onevalet_site.system_tasks import system_task_schedule_sync

if TYPE_CHECKING:
    from triggers.models import TriggerTask

FIRE_TASK = "triggers.tasks.fire_trigger"
CHECK_TASK = "triggers.tasks.check_condition"
# The one system task of the app: re-queue runs whose worker died (see ``reaper_schedule_sync``).
REAPER_TASK_NAME = "triggers: re-queue interrupted runs"
REAPER_TASK = "triggers.tasks.reap_stale_runs"
REAPER_EVERY_SECONDS = 60
# How far back the current slot of a crontab is searched; a firing later than this after its
# due time (beat down for a day) is found by the catch-up command instead.
SLOT_LOOKBACK = timedelta(days=2)


def slot_key(when: datetime) -> str:
    """The run key of a scheduled slot: its UTC time, so every process spells it alike."""
    return when.astimezone(dt_timezone.utc).isoformat()


def parse_cron(expression: str) -> dict[str, str]:
    """Five cron fields as ``CrontabSchedule`` keyword arguments; validated by celery's parser."""
    from celery.schedules import ParseException, crontab

    fields = expression.split()
    if len(fields) != 5:
        raise InvalidInput(f"{expression!r} is not a five-field cron expression (minute hour day month weekday)",
                           code="invalid_cron")
    names = ["minute", "hour", "day_of_month", "month_of_year", "day_of_week"]
    spec = dict(zip(names, fields, strict=True))
    try:
        crontab(**spec)
    except (ParseException, ValueError) as exc:
        raise InvalidInput(f"{expression!r} is not a valid cron expression ({exc})", code="invalid_cron") from None
    return spec


def periodic_task_name(task: TriggerTask) -> str:
    return f"trigger:{task.pk}"


def _clocked_for(run_at: datetime) -> ClockedSchedule:
    """The ``ClockedSchedule`` one-time tasks due at ``run_at`` share, rounded up to the second.

    Shared, not one per task: beat loads its enabled tasks with ``prefetch_related("clocked")``,
    which on SQLite (Django 5.2) becomes one ``id = 1 OR id = 2 OR ...`` expression, and a
    thousand distinct clocked rows due in beat's five-minute window exceed SQLite's
    expression depth — beat then crashes and nothing fires. Whole seconds bound the rows in
    that window to about 300 whatever the load; rounding up never fires early, and the run
    key still comes from the task's exact ``run_at``.
    """
    instant = run_at if run_at.microsecond == 0 else run_at.replace(microsecond=0) + timedelta(seconds=1)
    clocked = ClockedSchedule.objects.filter(clocked_time=instant).order_by("pk").first()
    return clocked or ClockedSchedule.objects.create(clocked_time=instant)


def _schedule_fields(task: TriggerTask) -> dict[str, Any]:
    """The schedule FKs for the task's kind (one-time tasks share a ``ClockedSchedule`` per instant)."""
    fields: dict[str, Any] = {"interval": None, "crontab": None, "clocked": None, "solar": None, "one_off": False}
    if task.kind == task.Kind.CRON:
        fields["crontab"], _ = CrontabSchedule.objects.get_or_create(
            **parse_cron(task.cron), timezone=zoneinfo.ZoneInfo(task.timezone))
    elif task.kind in (task.Kind.INTERVAL, task.Kind.CONDITION):
        fields["interval"], _ = IntervalSchedule.objects.get_or_create(
            every=task.interval_seconds, period=IntervalSchedule.SECONDS)
    elif task.kind == task.Kind.ONE_TIME:
        fields["clocked"], fields["one_off"] = _clocked_for(task.run_at), True
    return fields


def _delete_clocked_if_unused(clocked_id: int | None) -> None:
    if clocked_id is not None and not PeriodicTask.objects.filter(clocked_id=clocked_id).exists():
        ClockedSchedule.objects.filter(pk=clocked_id).delete()


def sync_periodic_task(task: TriggerTask) -> PeriodicTask | None:
    """Create or update the task's ``PeriodicTask`` to match it (event tasks have none).

    Call inside the service's transaction, after the task row is saved.
    """
    if task.kind == task.Kind.EVENT:
        delete_periodic_task(task)
        return None
    periodic = task.periodic_task
    fields = _schedule_fields(task)
    if periodic is None:
        periodic = PeriodicTask(name=periodic_task_name(task))
    previous_clocked_id = periodic.clocked_id
    for key, value in fields.items():
        setattr(periodic, key, value)
    periodic.task = CHECK_TASK if task.kind == task.Kind.CONDITION else FIRE_TASK
    periodic.kwargs = json.dumps({"task_id": task.pk})
    periodic.enabled = task.status == task.Status.ACTIVE
    periodic.description = f"OneValet trigger {task.pk} of user {task.owner_id}: {task.name}"[:500]
    periodic.save()  # model save: beat's change tracking sees it
    if previous_clocked_id != periodic.clocked_id:
        _delete_clocked_if_unused(previous_clocked_id)  # a rescheduled one-time task left it
    if task.periodic_task_id != periodic.pk:
        task.periodic_task = periodic
        task.save(update_fields=["periodic_task", "updated_at"])
    return periodic


def set_enabled(task: TriggerTask, enabled: bool) -> None:
    periodic = task.periodic_task
    if periodic is not None and periodic.enabled != enabled:
        periodic.enabled = enabled
        periodic.save()


def delete_periodic_task(task: TriggerTask) -> None:
    periodic = task.periodic_task
    if periodic is None:
        return
    clocked_id = periodic.clocked_id
    task.periodic_task = None
    task.save(update_fields=["periodic_task", "updated_at"])
    periodic.delete()
    _delete_clocked_if_unused(clocked_id)


def mark_beat_ran(task: TriggerTask, when: datetime) -> None:
    """Tell beat a slot was dealt with (the catch-up did it), so it does not fire it again."""
    periodic = task.periodic_task
    if periodic is not None:
        periodic.last_run_at = when
        if periodic.one_off:
            periodic.enabled = False
        periodic.save()


def reaper_schedule_sync() -> None:
    """Create or repair the beat schedule of ``reap_stale_runs`` — this one system task, by name.

    Users' trigger rows are never touched; an operator who disabled the task keeps it
    disabled, and an operator's other interval is replaced only when the task name is wrong
    or it has no interval at all (the admin may tune how often it runs).
    """
    system_task_schedule_sync(name=REAPER_TASK_NAME, task=REAPER_TASK, every=REAPER_EVERY_SECONDS,
                              period="seconds", description="Re-queues trigger runs whose worker stopped beating.")


# --- schedule arithmetic -------------------------------------------------------------------


def occurrences_between(schedule: Any, start: datetime, end: datetime, limit: int = 10_000) -> list[datetime]:
    """Due times of a celery crontab in ``(start, end]``, as aware UTC datetimes.

    Walks ``remaining_delta`` exactly like beat does, so DST gaps and folds are resolved the
    way beat resolves them.
    """
    found: list[datetime] = []
    cursor = start
    tz = getattr(schedule, "tz", dt_timezone.utc)
    while len(found) < limit:
        last, delta, _now = schedule.remaining_delta(cursor.astimezone(tz))
        nxt = last + delta
        nxt = nxt.replace(tzinfo=tz) if nxt.tzinfo is None else nxt
        nxt = nxt.astimezone(dt_timezone.utc)
        if nxt <= cursor:  # a DST fold can map two local times to one instant: step past it
            cursor = cursor + timedelta(minutes=1)
            continue
        if nxt > end:
            break
        found.append(nxt)
        cursor = nxt
    return found


def current_slot(task: TriggerTask, at: datetime) -> datetime:
    """The scheduled time a firing observed at ``at`` belongs to: its run key.

    Beat passes no scheduled time, and a redelivered message must map to the same slot as
    the first delivery, so the slot is derived from the schedule and the publish time.
    """
    periodic = task.periodic_task
    if task.kind == task.Kind.ONE_TIME and task.run_at is not None:
        return task.run_at
    if task.kind == task.Kind.CRON and periodic is not None and periodic.crontab is not None:
        due = occurrences_between(periodic.crontab.schedule, at - SLOT_LOOKBACK, at + timedelta(seconds=1))
        return due[-1] if due else at.replace(second=0, microsecond=0)
    if task.interval_seconds:
        # Beat fires at least one period apart, so flooring never puts two firings in one slot.
        anchor = task.created_at or at
        periods = int((at - anchor).total_seconds() // task.interval_seconds)
        return anchor + timedelta(seconds=periods * task.interval_seconds)
    return at.replace(microsecond=0)


def last_missed_slot(task: TriggerTask, now: datetime, grace: timedelta) -> datetime | None:
    """The latest due time in ``(last_run_at, now - grace]`` that never fired, or None."""
    periodic = task.periodic_task
    since = task.last_run_at or task.created_at
    if task.kind == task.Kind.ONE_TIME:
        return task.run_at if task.run_at and task.run_at <= now - grace else None
    if task.kind == task.Kind.CRON and periodic is not None and periodic.crontab is not None:
        due = occurrences_between(periodic.crontab.schedule, since, now - grace)
        return due[-1] if due else None
    if task.kind == task.Kind.INTERVAL and task.interval_seconds:
        slot = current_slot(task, now - grace)
        return slot if slot > since else None
    return None


def next_run_estimate(task: TriggerTask) -> datetime | None:
    """When beat will next fire the task (for display); None when it will not."""
    periodic = task.periodic_task
    if periodic is None or not periodic.enabled:
        return None
    now = timezone.now()
    if task.kind == task.Kind.ONE_TIME:
        return task.run_at
    if periodic.crontab is not None:
        due = occurrences_between(periodic.crontab.schedule, now, now + timedelta(days=400), limit=1)
        return due[0] if due else None
    if task.interval_seconds:
        return (task.last_run_at or now) + timedelta(seconds=task.interval_seconds)
    return None
