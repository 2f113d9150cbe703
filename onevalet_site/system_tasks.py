"""The beat schedules of OneValet's own periodic tasks (expiries, the stale-run reaper).

They live in django-celery-beat's tables beside the users' trigger schedules, so they are
synced one by one, by name, and nothing else in those tables is ever touched. An operator
may disable such a task or change how often it runs in the admin; a sync only repairs a
row whose task path is wrong or that lost its interval.
"""

from __future__ import annotations


def system_task_schedule_sync(*, name: str, task: str, every: int, period: str = "minutes",
                              description: str = "") -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    interval, _ = IntervalSchedule.objects.get_or_create(every=every, period=period)
    periodic, created = PeriodicTask.objects.get_or_create(
        name=name, defaults={"task": task, "interval": interval, "enabled": True, "description": description})
    if not created and (periodic.task != task or periodic.interval_id is None):
        periodic.task, periodic.interval = task, interval
        periodic.crontab = periodic.solar = periodic.clocked = None
        periodic.one_off = False
        periodic.save()  # a model save, so beat's change tracking sees it
