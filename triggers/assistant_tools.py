"""Tools that let the assistant schedule work for its user: reminders, recurring tasks.

Times the user says ("in 2 minutes", "at 15:00", "tomorrow 9:00") are read in the user's
time zone — the one the loop puts in ``ToolExecutionContext`` — and every answer repeats
the local time in words, so a misunderstanding shows before it matters. All tools act on
the caller's own tasks only (``context.tenant_id``).
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime, timedelta

from django.utils import timezone

from orchestrator.tools import ToolExecutionContext, tool
from triggers.models import TriggerTask
from triggers.selectors import trigger_task_find, trigger_task_list
from triggers.services import trigger_task_create, trigger_task_delete

_UNITS = {"second": 1, "sec": 1, "minute": 60, "min": 60, "hour": 3600, "hr": 3600, "day": 86400, "week": 604800}
_RELATIVE = re.compile(r"^in\s+(\d+(?:\.\d+)?|an?|one)\s*(second|sec|minute|min|hour|hr|day|week)s?$")
_CLOCK = re.compile(r"^(?:(today|tomorrow)\s*)?(?:at\s*)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")


def parse_when(text: str, tz_name: str, now: datetime | None = None) -> datetime:
    """An aware datetime for ``text``: ISO 8601, "in N <unit>", "[today|tomorrow] [at] H[:MM][am|pm]".

    A bare clock time that has already passed today means tomorrow.
    """
    tz = zoneinfo.ZoneInfo(tz_name)
    now = (now or timezone.now()).astimezone(tz)
    cleaned = " ".join(text.strip().lower().split())
    relative = _RELATIVE.match(cleaned)
    if relative:
        amount = 1.0 if relative.group(1) in ("a", "an", "one") else float(relative.group(1))
        return now + timedelta(seconds=amount * _UNITS[relative.group(2)])
    clock = _CLOCK.match(cleaned)
    if clock:
        day, hour, minute, meridiem = clock.group(1), int(clock.group(2)), int(clock.group(3) or 0), clock.group(4)
        if meridiem:
            if not 1 <= hour <= 12:
                raise ValueError(f"{text!r}: {hour} is not a 12-hour clock hour")
            hour = hour % 12 + (12 if meridiem == "pm" else 0)
        if hour > 23 or minute > 59:
            raise ValueError(f"{text!r} is not a time of day")
        date = now.date() + timedelta(days=1 if day == "tomorrow" else 0)
        # Through UTC and back: a wall time inside a DST gap lands on the real instant after it.
        when = datetime(date.year, date.month, date.day, hour, minute, tzinfo=tz)
        when = when.astimezone(zoneinfo.ZoneInfo("UTC")).astimezone(tz)
        if day is None and when <= now:
            when += timedelta(days=1)
        return when
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"could not understand the time {text!r}; use ISO 8601 (2030-01-31T09:00), "
                         '"in 2 minutes", "at 15:00" or "tomorrow 9:00"') from None
    return parsed.replace(tzinfo=tz) if parsed.tzinfo is None else parsed.astimezone(tz)


def _say(when: datetime, tz_name: str) -> str:
    local = when.astimezone(zoneinfo.ZoneInfo(tz_name))
    today = timezone.now().astimezone(local.tzinfo).date()
    day = {today: "today", today + timedelta(days=1): "tomorrow"}.get(local.date(), f"on {local:%A %d %B %Y}")
    return f"{day} at {local:%H:%M} ({tz_name})"


@tool
def create_reminder(text: str, when: str, context: ToolExecutionContext) -> str:
    """Remind the user of something once, at a given time (they get a notification).

    Args:
        text: What to remind them of, e.g. "stretch".
        when: ISO 8601 or the user's words: "in 2 minutes", "at 15:00", "tomorrow 9:00" (user's time zone).
    """
    run_at = parse_when(when, context.timezone)
    if run_at <= timezone.now() - timedelta(minutes=1):
        raise ValueError(f"{when!r} is in the past ({_say(run_at, context.timezone)})")
    task = trigger_task_create(owner_id=context.tenant_id, name=f"Reminder: {text}"[:200], kind=TriggerTask.Kind.ONE_TIME,
                               executor="notify", action={"message": f"Reminder: {text}", "title": "Reminder"},
                               run_at=run_at, timezone_name=context.timezone)
    return f"Reminder #{task.pk} set: “{text}” {_say(run_at, context.timezone)}."


@tool
def schedule_task(instruction: str, context: ToolExecutionContext, cron: str | None = None,
                  every_minutes: int | None = None, name: str | None = None) -> str:
    """Run an instruction for the user on a schedule; the result is sent to their inbox.

    Args:
        instruction: What to do each time, e.g. "summarise my unread e-mail".
        cron: Five-field cron in the user's time zone, e.g. "0 8 * * 1-5" (weekdays 08:00).
        every_minutes: Or: run every N minutes.
        name: A short name for the task.
    """
    if bool(cron) == bool(every_minutes):
        raise ValueError("give exactly one of cron or every_minutes")
    common = {"owner_id": context.tenant_id, "name": (name or instruction)[:200], "action": {"instruction": instruction},
              "timezone_name": context.timezone}
    if cron:
        task = trigger_task_create(kind=TriggerTask.Kind.CRON, cron=cron, **common)
        when = f"on cron “{cron}” ({context.timezone})"
    else:
        task = trigger_task_create(kind=TriggerTask.Kind.INTERVAL, interval_seconds=int(every_minutes) * 60, **common)
        when = f"every {every_minutes} minutes"
    following = f"; next run {_say(task.next_run_at, context.timezone)}" if task.next_run_at else ""
    return f"Scheduled task #{task.pk} “{task.name}” {when}{following}."


@tool
def list_tasks(context: ToolExecutionContext) -> list[dict]:
    """The user's scheduled tasks, reminders and triggers, newest first."""
    return [{"id": task.pk, "name": task.name, "kind": task.kind, "status": task.status,
             "next_run": _say(task.next_run_at, context.timezone) if task.next_run_at else None}
            for task in trigger_task_list(owner_id=context.tenant_id)[:50]]


@tool
def cancel_task(task: str, context: ToolExecutionContext) -> str:
    """Cancel (delete) one of the user's tasks or reminders.

    Args:
        task: Its id (e.g. "12") or its name.
    """
    found = trigger_task_find(owner_id=context.tenant_id, reference=task)
    trigger_task_delete(owner_id=context.tenant_id, task_id=found.pk)
    return f"Cancelled #{found.pk} “{found.name}”."
