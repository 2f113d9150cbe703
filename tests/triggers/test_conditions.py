"""Condition triggers: fire on the false -> true edge only, then respect the cooldown."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from notifications.models import Notification
from triggers import conditions, services
from triggers.models import TriggerRun
from triggers.tasks import check_condition

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def price() -> Any:
    box = {"value": 900}
    conditions.condition_check("test_price")(lambda owner_id, params: box["value"])
    yield box
    conditions.unregister("test_price")


def test_condition_edge_and_cooldown(user: Any, price: dict, eager_celery: Any) -> None:
    task = services.trigger_task_create(
        owner_id=user.pk, name="Cheap flight", kind="condition", executor="notify", action={"message": "Buy now"},
        condition={"check": "test_price", "params": {"route": "BER-NYC"}, "op": "lt", "value": 500},
        interval_seconds=60, cooldown_seconds=3600)
    periodic = PeriodicTask.objects.get(pk=task.periodic_task_id)
    assert periodic.task == "triggers.tasks.check_condition" and periodic.interval.every == 60
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        assert check_condition(task.pk) is False  # 900: false
        price["value"] = 450
        assert check_condition(task.pk) is True   # false -> true: fires
        assert check_condition(task.pk) is False  # still true: no new edge
        price["value"] = 900
        assert check_condition(task.pk) is False
        price["value"] = 400
        clock.shift(timedelta(minutes=10))
        assert check_condition(task.pk) is False  # an edge, but inside the cooldown
        price["value"] = 900
        check_condition(task.pk)
        price["value"] = 300
        clock.shift(timedelta(hours=1))
        assert check_condition(task.pk) is True   # edge after the cooldown: fires again
    assert TriggerRun.objects.filter(task=task, trigger_type="condition").count() == 2
    assert Notification.objects.filter(owner=user).count() == 2
    task.refresh_from_db()
    assert task.last_state is True and task.last_value == 300
