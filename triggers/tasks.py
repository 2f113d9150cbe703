"""Celery tasks of the triggers app: thin — ids in, a service call, retries here.

``fire_trigger`` is what every trigger's ``PeriodicTask`` calls (kwargs ``{"task_id": n}``)
and what the event consumer, the condition poller and the catch-up enqueue with an
explicit run key. Beat sends no scheduled time, so the publishing side stamps ``fired_at``
into the message (``stamp_fired_at``): a redelivered message keeps it, maps to the same
slot and therefore to the same run key.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from celery import shared_task
from celery.signals import before_task_publish
from django.utils import timezone

from triggers import schedules
from triggers.channels import DeliveryError, deliver
from triggers.firing import RUN_LEASE, FireOutcome, FireRequest, condition_poll, trigger_fire
from triggers.models import TriggerTask

logger = logging.getLogger("onevalet.triggers")

BUSY_RETRIES = 30


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, timezone.utc)


@shared_task(bind=True, name="triggers.tasks.fire_trigger", max_retries=BUSY_RETRIES)
def fire_trigger(self: Any, task_id: int, scheduled_for: str | None = None, run_key: str | None = None,
                 trigger_type: str = "schedule", payload: dict[str, Any] | None = None, late: bool = False,
                 fired_at: str | None = None) -> str:
    """Fire trigger ``task_id`` once for its slot (or the given run key)."""
    task = TriggerTask.objects.select_related("periodic_task__crontab").filter(pk=task_id).first()
    if task is None:
        return FireOutcome.INACTIVE.value
    slot = _parse(scheduled_for) or schedules.current_slot(task, _parse(fired_at) or timezone.now())
    request = FireRequest(task_id=task_id, run_key=run_key or schedules.slot_key(slot), scheduled_for=slot,
                          trigger_type=trigger_type, payload=payload or {}, late=late)
    outcome = trigger_fire(request)
    if outcome == FireOutcome.BUSY:
        # Another worker holds the run and was alive a moment ago: look again after a lease.
        raise self.retry(countdown=RUN_LEASE.total_seconds())
    return outcome.value


@shared_task(name="triggers.tasks.reap_stale_runs", ignore_result=True)
def reap_stale_runs() -> int:
    """Periodic (beat, ``schedules.reaper_schedule_sync``): re-queue runs of dead workers.

    Without it a run whose worker was killed with its process group would stay ``running``
    until the next start-up catch-up or the broker's hour-long visibility timeout.
    """
    from triggers.catchup import requeue_stale_runs

    return len(requeue_stale_runs())


@shared_task(name="triggers.tasks.check_condition")
def check_condition(task_id: int) -> bool:
    """Poll one condition trigger (its interval ``PeriodicTask`` calls this)."""
    return condition_poll(task_id) is not None


@shared_task(bind=True, name="triggers.tasks.deliver_notification", autoretry_for=(DeliveryError,),
             retry_backoff=5, retry_backoff_max=600, retry_jitter=True, max_retries=6)
def deliver_notification(self: Any, delivery_id: int) -> None:
    """Send one queued e-mail/webhook delivery; failures retry with exponential back-off."""
    deliver(delivery_id, final_attempt=self.request.retries >= self.max_retries)


@before_task_publish.connect
def stamp_fired_at(sender: str | None = None, body: Any = None, **_: Any) -> None:
    """Put the publish time into every ``fire_trigger`` message that has no slot of its own."""
    if sender != schedules.FIRE_TASK:
        return
    kwargs = body[1] if isinstance(body, tuple | list) and len(body) > 1 else None
    if isinstance(kwargs, dict) and not kwargs.get("scheduled_for"):
        kwargs.setdefault("fired_at", timezone.now().isoformat())
