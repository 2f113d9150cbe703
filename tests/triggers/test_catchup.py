"""Missed runs while OneValet was down: run once (late), skip, or ask."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest
import time_machine
from django.core.management import call_command

from notifications.models import Notification
from triggers import services
from triggers.models import TriggerRun, TriggerTask

pytestmark = pytest.mark.django_db(transaction=True)

CREATED = datetime(2030, 6, 1, 6, 0, tzinfo=dt_timezone.utc)  # 08:00 in Berlin
DOWN_UNTIL = datetime(2030, 6, 3, 12, 0, tzinfo=dt_timezone.utc)  # missed 07:00 UTC on Jun 1, 2, 3


def daily(owner: Any, policy: str) -> TriggerTask:
    with time_machine.travel(CREATED, tick=False):
        return services.trigger_task_create(owner_id=owner.pk, name=f"Daily {policy}", kind="cron", cron="0 9 * * *",
                                            executor="notify", action={"message": "Good morning"},
                                            missed_run_policy=policy)


def test_run_once_fires_latest_slot_once_marked_late(berlin_user: Any, eager_celery: Any) -> None:
    task = daily(berlin_user, "run_once")
    with time_machine.travel(DOWN_UNTIL, tick=False):
        call_command("catch_up_triggers")
        call_command("catch_up_triggers")  # idempotent
    run = TriggerRun.objects.get(task=task)
    assert run.late and run.status == "completed"
    assert run.scheduled_for == datetime(2030, 6, 3, 7, 0, tzinfo=dt_timezone.utc)
    note = Notification.objects.get(owner=berlin_user)
    assert note.title.endswith("(late)") and "ran late" in note.body
    task.refresh_from_db()
    assert task.periodic_task.last_run_at == DOWN_UNTIL  # beat will not fire the overdue slot again


def test_skip_records_a_skipped_run(berlin_user: Any, eager_celery: Any) -> None:
    task = daily(berlin_user, "skip")
    with time_machine.travel(DOWN_UNTIL, tick=False):
        call_command("catch_up_triggers")
    run = TriggerRun.objects.get(task=task)
    assert run.status == "skipped" and run.late
    assert not Notification.objects.filter(owner=berlin_user).exists()


def test_ask_notifies_the_user(berlin_user: Any, eager_celery: Any) -> None:
    task = daily(berlin_user, "ask")
    with time_machine.travel(DOWN_UNTIL, tick=False):
        call_command("catch_up_triggers")
    assert TriggerRun.objects.get(task=task).status == "skipped"
    note = Notification.objects.get(owner=berlin_user)
    assert note.title == "Missed: Daily ask" and "09:00 (Europe/Berlin)" in note.body
    assert note.data["action"] == "run_now" and note.link == f"/api/v1/triggers/{task.pk}/run"


def test_nothing_missed_nothing_done(berlin_user: Any, eager_celery: Any) -> None:
    daily(berlin_user, "run_once")
    with time_machine.travel(CREATED + timedelta(minutes=59), tick=False):
        call_command("catch_up_triggers")
    assert not TriggerRun.objects.exists()


def test_missed_one_time_with_skip_expires(berlin_user: Any, eager_celery: Any) -> None:
    with time_machine.travel(CREATED, tick=False):
        task = services.trigger_task_create(owner_id=berlin_user.pk, name="once", kind="one_time",
                                            executor="notify", action={"message": "m"},
                                            run_at=CREATED + timedelta(hours=1), missed_run_policy="skip")
    with time_machine.travel(DOWN_UNTIL, tick=False):
        call_command("catch_up_triggers")
    task.refresh_from_db()
    assert task.status == "expired" and not task.periodic_task.enabled
