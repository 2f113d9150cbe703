"""DST: crontabs in the user's zone fire once per local day across both changes, as beat would."""

from __future__ import annotations

import zoneinfo
from collections import Counter
from datetime import date, datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
import time_machine
from django_celery_beat.tzcrontab import TzAwareCrontab

from triggers.schedules import occurrences_between

# 2030: EU changes on Mar 31 / Oct 27, the US on Mar 10 / Nov 3.
TRANSITIONS = {"Europe/Berlin": [date(2030, 3, 31), date(2030, 10, 27)],
               "America/New_York": [date(2030, 3, 10), date(2030, 11, 3)]}


def simulate_beat(schedule: TzAwareCrontab, start: datetime, end: datetime) -> list[datetime]:
    """Beat's loop: ask ``is_due(last_run_at)`` at the time it asks, sleep what it says (<= 5 min)."""
    fired, last, now = [], start, start
    with time_machine.travel(now, tick=False) as clock:
        while now < end:
            due, next_seconds = schedule.is_due(last)
            if due:
                fired.append(now)
                last = now
                continue
            step = timedelta(seconds=max(1.0, min(next_seconds, 300)))
            now += step
            clock.move_to(now)
    return fired


@pytest.mark.parametrize("tz_name", list(TRANSITIONS))
@pytest.mark.parametrize(("hour", "minute"), [(1, 30), (2, 30), (9, 0)])
def test_one_firing_per_local_day_across_dst(tz_name: str, hour: int, minute: int) -> None:
    tz = zoneinfo.ZoneInfo(tz_name)
    schedule = TzAwareCrontab(minute=str(minute), hour=str(hour), tz=tz)
    for change in TRANSITIONS[tz_name]:
        start = datetime.combine(change - timedelta(days=2), datetime.min.time(), tz).astimezone(dt_timezone.utc)
        end = start + timedelta(days=4)
        fired = simulate_beat(schedule, start, end)
        per_day = Counter(moment.astimezone(tz).date() for moment in fired)
        assert sorted(per_day) == [change - timedelta(days=d) for d in (2, 1)] + [change + timedelta(days=d)
                                                                                   for d in (0, 1)], fired
        assert set(per_day.values()) == {1}, fired
        # Our slot arithmetic agrees with what beat fired.
        assert occurrences_between(schedule, start, end) == [f.replace(second=0, microsecond=0) for f in fired]


def test_occurrences_over_a_whole_year_are_daily() -> None:
    tz = zoneinfo.ZoneInfo("Europe/Berlin")
    schedule = TzAwareCrontab(minute="30", hour="2", tz=tz)
    start = datetime(2030, 1, 1, tzinfo=dt_timezone.utc)
    due = occurrences_between(schedule, start, start + timedelta(days=365))
    assert len(due) == 365
    assert len({d.astimezone(tz).date() for d in due}) == 365
