"""fire_trigger: the loop runs against the scripted LLM, the user is notified, once per slot."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from notifications.models import Notification
from orchestrator.models import LoopRun
from tests.llm_server import text
from triggers import services
from triggers.firing import RUN_LEASE, FireOutcome, FireRequest, trigger_fire
from triggers.models import NotificationDelivery, TriggerRun
from triggers.tasks import fire_trigger

pytestmark = pytest.mark.django_db(transaction=True)


def test_fire_runs_loop_and_notifies(user: Any, llm_server: Any, trigger_orchestrator: Any) -> None:
    llm_server.script(text("You have 3 unread mails, none urgent."))
    task = services.trigger_task_create(owner_id=user.pk, name="Mail digest", kind="cron", cron="0 8 * * *",
                                        action={"instruction": "Summarise my unread mail"})
    slot = "2030-01-02T08:00:00+00:00"
    assert fire_trigger.apply(kwargs={"task_id": task.pk, "scheduled_for": slot}).get() == "done"
    assert llm_server.requests[0].last_message["content"] == "[Scheduled task] Summarise my unread mail"
    run = TriggerRun.objects.get(task=task)
    assert run.status == "completed" and run.result.startswith("You have 3")
    assert run.loop_run is not None and LoopRun.objects.get(pk=run.loop_run_id).source == "trigger"
    note = Notification.objects.get(owner=user)
    assert note.title == "Mail digest" and "3 unread" in note.body and note.source == "trigger"
    task.refresh_from_db()
    assert task.conversation_id is not None and str(run.loop_run.conversation_id) == str(task.conversation_id)
    assert task.status == "active" and task.last_run_at.isoformat() == slot


def test_same_slot_twice_executes_once(user: Any, llm_server: Any, trigger_orchestrator: Any) -> None:
    llm_server.script(text("done once"))
    task = services.trigger_task_create(owner_id=user.pk, name="t", kind="cron", cron="*/5 * * * *",
                                        action={"instruction": "x"})
    kwargs = {"task_id": task.pk, "scheduled_for": "2030-01-01T10:05:00+00:00"}
    assert fire_trigger.apply(kwargs=kwargs).get() == "done"
    assert fire_trigger.apply(kwargs=kwargs).get() == "duplicate"
    assert len(llm_server.requests) == 1
    assert TriggerRun.objects.filter(task=task).count() == 1
    assert Notification.objects.filter(owner=user).count() == 1


def test_beat_firings_without_slot_map_to_the_crontab_slot(user: Any, llm_server: Any,
                                                           trigger_orchestrator: Any) -> None:
    """Beat sends only task_id; two deliveries published in the same slot are one run."""
    llm_server.script(text("ok"))
    task = services.trigger_task_create(owner_id=user.pk, name="t", kind="cron", cron="0 * * * *",
                                        action={"instruction": "x"})
    fire_trigger.apply(kwargs={"task_id": task.pk, "fired_at": "2030-01-01T10:00:01+00:00"})
    fire_trigger.apply(kwargs={"task_id": task.pk, "fired_at": "2030-01-01T10:00:40+00:00"})
    run = TriggerRun.objects.get(task=task)
    assert run.scheduled_for.isoformat() == "2030-01-01T10:00:00+00:00"


def test_one_time_notify_executor_completes(user: Any) -> None:
    task = services.trigger_task_create(owner_id=user.pk, name="Stretch", kind="one_time", executor="notify",
                                        action={"message": "Time to stretch"},
                                        run_at=timezone.now() + timedelta(minutes=1))
    assert fire_trigger.apply(kwargs={"task_id": task.pk}).get() == "done"
    task.refresh_from_db()
    assert task.status == "completed"
    assert not task.periodic_task.enabled
    assert Notification.objects.get(owner=user).body == "Time to stretch"
    assert fire_trigger.apply(kwargs={"task_id": task.pk}).get() == "inactive"


def test_paused_task_does_not_fire(user: Any) -> None:
    task = services.trigger_task_create(owner_id=user.pk, name="n", kind="interval", interval_seconds=60,
                                        executor="notify", action={"message": "m"})
    services.trigger_task_pause(owner_id=user.pk, task_id=task.pk)
    assert fire_trigger.apply(kwargs={"task_id": task.pk}).get() == "inactive"
    assert not TriggerRun.objects.exists()


def test_redelivery_takes_over_a_dead_workers_run_once(user: Any) -> None:
    """A run left `running` by a dead worker: fresh heartbeat -> busy; stale -> re-run once."""
    task = services.trigger_task_create(owner_id=user.pk, name="n", kind="interval", interval_seconds=60,
                                        executor="notify", action={"message": "m"})
    slot = timezone.now().replace(microsecond=0)
    request = FireRequest(task_id=task.pk, run_key=slot.isoformat(), scheduled_for=slot)
    TriggerRun.objects.create(task=task, owner=user, run_key=request.run_key, scheduled_for=slot,
                              status="running", worker="dead:1", started_at=timezone.now(),
                              heartbeat_at=timezone.now())
    assert trigger_fire(request) == FireOutcome.BUSY
    TriggerRun.objects.update(heartbeat_at=timezone.now() - RUN_LEASE - timedelta(seconds=1))
    assert trigger_fire(request) == FireOutcome.DONE
    assert trigger_fire(request) == FireOutcome.DUPLICATE
    run = TriggerRun.objects.get()
    assert run.status == "completed" and run.attempts == 2
    assert Notification.objects.filter(owner=user).count() == 1


def test_webhook_and_email_channels_are_recorded(user: Any, mailoutbox: Any,
                                                 django_capture_on_commit_callbacks: Any) -> None:
    from triggers.channels import DeliveryError, deliver
    from triggers.tasks import deliver_notification

    user.email = "me@example.test"
    user.save()
    task = services.trigger_task_create(
        owner_id=user.pk, name="n", kind="interval", interval_seconds=60, executor="notify",
        action={"message": "m"},
        output={"channels": ["email", "webhook"], "webhook_url": "http://127.0.0.1:9/hook"})
    queued: list[int] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(deliver_notification, "delay", lambda pk: queued.append(pk))
        fire_trigger.apply(kwargs={"task_id": task.pk, "scheduled_for": "2030-01-01T00:00:00+00:00"})
    by_channel = {d.channel: d for d in NotificationDelivery.objects.all()}
    assert by_channel["inbox"].status == "sent"
    assert sorted(queued) == sorted([by_channel["email"].pk, by_channel["webhook"].pk])
    deliver(by_channel["email"].pk, final_attempt=False)
    assert mailoutbox[0].to == ["me@example.test"]
    # Nothing listens on the discard port: the attempt fails, is recorded, and is retried.
    with pytest.raises(DeliveryError):
        deliver(by_channel["webhook"].pk, final_attempt=False)
    deliver(by_channel["webhook"].pk, final_attempt=True)
    email, webhook = (NotificationDelivery.objects.get(pk=by_channel[c].pk) for c in ("email", "webhook"))
    assert email.status == "sent" and email.attempts == 1
    assert webhook.status == "failed" and webhook.attempts == 2 and "refused" in webhook.last_error
    assert deliver_notification.autoretry_for == (DeliveryError,) and deliver_notification.retry_backoff
