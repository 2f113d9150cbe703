"""Service-level: create / update / pause / resume / delete keep the PeriodicTask in step."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, PeriodicTask, PeriodicTasks

from onevalet_site.errors import InvalidInput, NotFound
from triggers import services
from triggers.models import TriggerTask

pytestmark = pytest.mark.django_db


def make_cron(owner: Any, cron: str = "30 8 * * 1-5") -> TriggerTask:
    return services.trigger_task_create(owner_id=owner.pk, name="Morning brief", kind="cron", cron=cron,
                                        action={"instruction": "Summarise my mail"})


def test_create_cron_makes_periodic_task_in_users_timezone(berlin_user: Any) -> None:
    task = make_cron(berlin_user)
    periodic = PeriodicTask.objects.get(pk=task.periodic_task_id)
    assert periodic.task == "triggers.tasks.fire_trigger"
    assert json.loads(periodic.kwargs) == {"task_id": task.pk}
    assert periodic.enabled
    assert str(periodic.crontab.timezone) == "Europe/Berlin"
    assert (periodic.crontab.minute, periodic.crontab.hour, periodic.crontab.day_of_week) == ("30", "8", "1-5")
    assert task.next_run_at is not None and task.next_run_at > timezone.now()


def test_update_changes_schedule_and_beat_sees_it(berlin_user: Any) -> None:
    task = make_cron(berlin_user)
    before = PeriodicTasks.last_change()
    services.trigger_task_update(owner_id=berlin_user.pk, task_id=task.pk, cron="0 9 * * *")
    periodic = PeriodicTask.objects.get(pk=task.periodic_task_id)
    assert (periodic.crontab.minute, periodic.crontab.hour) == ("0", "9")
    assert PeriodicTasks.last_change() is not None and (before is None or PeriodicTasks.last_change() >= before)


def test_pause_resume_toggle_enabled(berlin_user: Any) -> None:
    task = make_cron(berlin_user)
    services.trigger_task_pause(owner_id=berlin_user.pk, task_id=task.pk)
    assert not PeriodicTask.objects.get(pk=task.periodic_task_id).enabled
    assert TriggerTask.objects.get(pk=task.pk).status == "paused"
    services.trigger_task_resume(owner_id=berlin_user.pk, task_id=task.pk)
    assert PeriodicTask.objects.get(pk=task.periodic_task_id).enabled


def test_delete_removes_periodic_task_and_clocked(berlin_user: Any) -> None:
    task = services.trigger_task_create(owner_id=berlin_user.pk, name="once", kind="one_time", executor="notify",
                                        action={"message": "hi"}, run_at=timezone.now() + timedelta(hours=1))
    periodic = PeriodicTask.objects.get(pk=task.periodic_task_id)
    assert periodic.one_off and periodic.clocked is not None
    clocked_id = periodic.clocked_id
    services.trigger_task_delete(owner_id=berlin_user.pk, task_id=task.pk)
    assert not PeriodicTask.objects.filter(pk=periodic.pk).exists()
    assert not ClockedSchedule.objects.filter(pk=clocked_id).exists()
    assert not TriggerTask.objects.filter(pk=task.pk).exists()


def test_interval_and_event_kinds(user: Any) -> None:
    interval = services.trigger_task_create(owner_id=user.pk, name="poll", kind="interval", interval_seconds=600,
                                            action={"instruction": "check"})
    assert PeriodicTask.objects.get(pk=interval.periodic_task_id).interval.every == 600
    event = services.trigger_task_create(owner_id=user.pk, name="mail", kind="event", event_type="email.received",
                                         event_filter={"from": {"contains": "amazon"}},
                                         action={"instruction": "tell me"})
    assert event.periodic_task_id is None


def test_other_users_task_is_not_found(user: Any, other_user: Any) -> None:
    task = make_cron(user)
    for service in (services.trigger_task_pause, services.trigger_task_resume, services.trigger_task_delete):
        with pytest.raises(NotFound):
            service(owner_id=other_user.pk, task_id=task.pk)
    with pytest.raises(NotFound):
        services.trigger_task_update(owner_id=other_user.pk, task_id=task.pk, name="mine now")


@pytest.mark.parametrize("kwargs", [
    {"kind": "cron", "cron": "61 * * * *"},
    {"kind": "cron", "cron": "* * *"},
    {"kind": "interval", "interval_seconds": 1},
    {"kind": "event", "event_type": ""},
    {"kind": "event", "event_type": "x", "event_filter": {"a": {"gt": 1, "bogus": 1}}},
    {"kind": "cron", "cron": "0 8 * * *", "executor": "nope"},
    {"kind": "cron", "cron": "0 8 * * *", "output": {"channels": ["webhook"], "webhook_url": "file:///etc/passwd"}},
    {"kind": "one_time", "run_at": None},
])
def test_invalid_input_is_refused_and_nothing_saved(user: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        services.trigger_task_create(owner_id=user.pk, name="bad", action={"instruction": "x"}, **kwargs)
    assert not TriggerTask.objects.exists()
    assert not PeriodicTask.objects.filter(name__startswith="trigger:").exists()
