"""Triggers through real processes: ``celery worker`` (prefork) and ``celery beat`` (DatabaseScheduler).

What in-process tests cannot show: that beat picks up schedules written by the services
while it runs (creation, edits, pauses) without a restart; that a one-off clocked schedule
fires once; that a worker killed with SIGKILL mid-run — its broker message unacknowledged,
which Redis would redeliver only after the hour-long visibility timeout — is recovered by
the periodic reaper, with exactly one completed run and one notification per firing.

Every wait polls the database (or a process log) against a deadline; nothing asserts after
a fixed sleep. The processes share a database with the test (see ``process_db``).
"""

from __future__ import annotations

import json
import time
import zoneinfo
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest
from django.test import Client
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from notifications.models import Notification
from tests.factories import make_user
from tests.llm_server import RecordedRequest, Step, text
from triggers import schedules, services
from triggers.models import TriggerRun, TriggerTask

T = TypeVar("T")

pytestmark = [pytest.mark.celery, pytest.mark.timeout(300)]


def wait_until(probe: Callable[[], T], *, timeout: float, what: str) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def completed_runs(task: TriggerTask) -> int:
    return TriggerRun.objects.filter(task=task, status=TriggerRun.Status.COMPLETED).count()


def sends(log: str, task: TriggerTask) -> int:
    """How often beat's log says it sent the task's ``PeriodicTask`` to the broker."""
    return log.count(f"Sending due task {schedules.periodic_task_name(task)} ")


def test_beat_and_worker_fire_edit_and_pause_schedules(celery_processes: Any, llm_server: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Intervals of seconds keep the test short; the product's floor of 10 s is a policy, not a mechanism.
    monkeypatch.setattr(services, "MIN_INTERVAL_SECONDS", 1)
    user = make_user(display_name="Proc")
    answer = "Dentist at 15:00 today — leave by 14:30."

    def respond(request: RecordedRequest) -> Step:
        """Answer by instruction: the firings of several tasks reach the server in any order."""
        content = request.last_message["content"]
        return text(answer if "dentist" in content else "Have a glass of water.")

    # Every firing of "Water" runs the loop too: with three or more LLM firings on two pool
    # processes, one process runs at least two, each in a new event loop.
    monkeypatch.setattr(llm_server, "responder", respond)
    worker = celery_processes.start_worker()
    beat = celery_processes.start_beat()
    celery_processes.wait_for_log("worker", " ready.")

    once = services.trigger_task_create(owner_id=user.pk, name="Dentist", kind="one_time",
                                        action={"instruction": "Remind me of the dentist"},
                                        run_at=timezone.now() + timedelta(seconds=3))
    water = services.trigger_task_create(owner_id=user.pk, name="Water", kind="interval", interval_seconds=3,
                                         action={"instruction": "Remind me to drink water"})
    stretch = services.trigger_task_create(owner_id=user.pk, name="Stretch", kind="interval",
                                           interval_seconds=3600, executor="notify", action={"message": "Stretch"})

    # The one-time task: the loop's answer reaches the user, the task completes, beat turns it off.
    wait_until(lambda: TriggerTask.objects.get(pk=once.pk).status == TriggerTask.Status.COMPLETED, timeout=60,
               what="the one-time task to complete")
    run = TriggerRun.objects.get(task=once)
    assert run.status == TriggerRun.Status.COMPLETED and run.result == answer and run.attempts == 1
    assert "[Scheduled task] Remind me of the dentist" in [r.last_message["content"] for r in llm_server.requests]
    note = Notification.objects.get(owner=user, title="Dentist")
    assert note.body == answer and note.source == "trigger"
    assert not PeriodicTask.objects.get(pk=once.periodic_task_id).enabled

    # The interval task fires repeatedly, one run and one notification per firing.
    wait_until(lambda: completed_runs(water) >= 3, timeout=30, what="three firings of the interval task")
    assert Notification.objects.filter(owner=user, title="Water", body="Have a glass of water.").count() >= 3

    # An edit of a running schedule is honoured by the same beat: 3600 s -> 3 s fires within seconds.
    services.trigger_task_update(owner_id=user.pk, task_id=stretch.pk, interval_seconds=3)
    wait_until(lambda: completed_runs(stretch) >= 1, timeout=30, what="the edited schedule to fire")
    assert beat.poll() is None and worker.poll() is None  # nothing was restarted

    # Pause: once beat has seen it, the task is never sent again. The edited task's firings
    # are the clock: three of them (>= 9 s) outlast beat's 5 s re-read of the schedule.
    paused_at = timezone.now()
    services.trigger_task_pause(owner_id=user.pk, task_id=water.pk)
    base = completed_runs(stretch)
    wait_until(lambda: completed_runs(stretch) >= base + 3, timeout=40, what="beat to tick past the pause")
    sent_after_pause = sends(celery_processes.log("beat"), water)
    base = completed_runs(stretch)
    wait_until(lambda: completed_runs(stretch) >= base + 3, timeout=40, what="three more firings of the clock task")
    assert sends(celery_processes.log("beat"), water) == sent_after_pause
    assert not TriggerRun.objects.filter(task=water, started_at__gt=paused_at).exists()

    # Exactly once, across the whole test: beat sent the one-off once; every run notified once.
    assert sends(celery_processes.log("beat"), once) == 1
    assert TriggerRun.objects.filter(task=once).count() == 1
    for task in (water, stretch):
        runs = TriggerRun.objects.filter(task=task)
        assert not runs.exclude(status=TriggerRun.Status.COMPLETED).values_list("error", flat=True)
        assert Notification.objects.filter(owner=user, title=task.name).count() == runs.count()
        assert runs.values("run_key").distinct().count() == runs.count()
    assert not llm_server.unexpected


def next_minute(after: datetime) -> datetime:
    """The first whole minute strictly after ``after``: when ``* * * * *`` is next due."""
    return after.replace(second=0, microsecond=0) + timedelta(minutes=1)


def admin_edit_cron(client: Client, task: TriggerTask, cron: str) -> None:
    """POST the TriggerTask admin change form with the task's values and a new crontab."""
    task = TriggerTask.objects.get(pk=task.pk)
    response = client.post(f"/admin/triggers/triggertask/{task.pk}/change/", {
        "name": task.name, "executor": task.executor, "action": json.dumps(task.action),
        "output": json.dumps(task.output), "cron": cron, "missed_run_policy": task.missed_run_policy,
        "event_filter": json.dumps(task.event_filter), "condition": json.dumps(task.condition),
        "cooldown_seconds": str(task.cooldown_seconds), "runs-TOTAL_FORMS": "0", "runs-INITIAL_FORMS": "0"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert response["Location"].rstrip("/").endswith("/admin/triggers/triggertask"), response["Location"]


@pytest.mark.celery
def test_cron_task_fires_through_beat_and_an_admin_crontab_edit_is_honoured(
        celery_processes: Any, llm_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 8: a ``* * * * *`` task fires via beat and the worker, the loop's answer becomes a
    notification; an admin edit of the crontab reaches the running beat, which stops firing it.

    The owner lives at UTC+05:30, so the new minute is written in their zone: read as UTC, it
    would be due within the watched window (local minute + 31 is UTC minute + 1).
    """
    monkeypatch.setattr(services, "MIN_INTERVAL_SECONDS", 1)  # the clock task below
    zone = zoneinfo.ZoneInfo("Asia/Kolkata")
    user = make_user(display_name="Cron", timezone="Asia/Kolkata")
    admin_user = make_user(is_staff=True, is_superuser=True)
    answer = "Standup in 10 minutes: your notes are in the shared doc."
    monkeypatch.setattr(llm_server, "responder", lambda request: text(answer))  # every firing gets the answer

    celery_processes.start_worker()
    beat = celery_processes.start_beat()
    celery_processes.wait_for_log("worker", " ready.")
    task = services.trigger_task_create(owner_id=user.pk, name="Standup", kind="cron", cron="* * * * *",
                                        action={"instruction": "Remind me of the standup"})
    periodic = PeriodicTask.objects.get(pk=task.periodic_task_id)
    assert str(periodic.crontab.timezone) == "Asia/Kolkata" and periodic.enabled

    # 1. Beat sends it at the next minute boundary; the worker runs the loop; the user is notified.
    wait_until(lambda: completed_runs(task) >= 1 and Notification.objects.filter(
        owner=user, title="Standup", body=answer).exists(), timeout=75, what="the cron task's first firing")
    run = TriggerRun.objects.filter(task=task, status=TriggerRun.Status.COMPLETED).earliest("started_at")
    assert run.result == answer and run.scheduled_for.second == 0 and run.scheduled_for.microsecond == 0
    assert "[Scheduled task] Remind me of the standup" in [r.last_message["content"] for r in llm_server.requests]
    assert Notification.objects.get(owner=user, title="Standup", body=answer).source == "trigger"

    # 2. A superuser edits the crontab in the admin to a minute half an hour away in the owner's zone.
    client = Client()
    client.force_login(admin_user)
    new_minute = (timezone.now().astimezone(zone).minute + 31) % 60
    admin_edit_cron(client, task, f"{new_minute} * * * *")
    edited_at = timezone.now()
    runs_at_edit = TriggerRun.objects.filter(task=task).count()
    crontab = PeriodicTask.objects.get(pk=task.periodic_task_id).crontab
    assert (crontab.minute, crontab.hour, crontab.day_of_month, crontab.month_of_year, crontab.day_of_week,
            str(crontab.timezone)) == (str(new_minute), "*", "*", "*", "*", "Asia/Kolkata")
    edited = TriggerTask.objects.get(pk=task.pk)
    assert edited.cron == f"{new_minute} * * * *" and edited.timezone == "Asia/Kolkata"
    assert edited.next_run_at.astimezone(zone).minute == new_minute
    assert timedelta(minutes=29) <= edited.next_run_at - edited_at <= timedelta(minutes=31)

    # The old schedule would be due at the next boundary. A clock task (every 2 s, no LLM) shows
    # that beat and the worker are still going well past it; meanwhile the cron task stays quiet.
    # A firing beat sent in the seconds before it re-read the schedule (it re-reads every 5 s)
    # may still run once: at most one run, started right after the edit.
    clock = services.trigger_task_create(owner_id=user.pk, name="Clock", kind="interval", interval_seconds=2,
                                         executor="notify", action={"message": "tick"})
    boundary = next_minute(edited_at)
    quiet_until = time.monotonic() + 65

    def stray_runs() -> list[TriggerRun]:
        return list(TriggerRun.objects.filter(task=task).order_by("pk")[runs_at_edit:])

    def window_over() -> bool:
        strays = stray_runs()
        assert len(strays) <= 1 and all(r.started_at <= edited_at + timedelta(seconds=10) for r in strays), (
            f"the edited cron task fired again: {[(r.scheduled_for, r.started_at) for r in strays]}")
        ticked_past = TriggerRun.objects.filter(task=clock, status=TriggerRun.Status.COMPLETED,
                                                started_at__gt=boundary + timedelta(seconds=5)).exists()
        return ticked_past and time.monotonic() >= quiet_until

    wait_until(window_over, timeout=90, what="beat to tick past the old schedule's next minute")
    assert TriggerRun.objects.filter(task=task).count() <= runs_at_edit + 1
    assert not TriggerRun.objects.filter(task=task, started_at__gt=edited_at + timedelta(seconds=10)).exists()
    assert f"Sending due task {schedules.periodic_task_name(task)} " in celery_processes.log("beat")
    assert beat.poll() is None and celery_processes.processes["worker"].poll() is None  # nothing was restarted

    runs = TriggerRun.objects.filter(task=task)
    assert not runs.exclude(status=TriggerRun.Status.COMPLETED).values_list("error", flat=True)
    assert Notification.objects.filter(owner=user, title="Standup").count() == runs.count()
    assert runs.values("run_key").distinct().count() == runs.count()
    assert not llm_server.unexpected


def test_worker_killed_mid_run_is_recovered_once_by_the_reaper(celery_processes: Any, llm_server: Any) -> None:
    """SIGKILL the worker's process group while two runs wait on the LLM; a new worker finishes each once.

    Nothing re-sends the killed worker's messages (Redis would, after an hour): beat's
    periodic reaper finds the runs whose heartbeat stopped and re-queues them, and the
    run-key claim lets the new worker take each over exactly once.
    """
    user = make_user(display_name="Kill")
    seen: set[str] = set()

    def first_hangs(request: RecordedRequest) -> Step:
        """The first request of each firing hangs (the worker gets killed meanwhile); the retry answers."""
        instruction = request.last_message["content"]
        if instruction not in seen:
            seen.add(instruction)
            return text("never delivered", latency=120)
        return text(f"Done: {instruction.removeprefix('[Scheduled task] ')}")

    llm_server.script(*[first_hangs] * 4)
    # The operator's admin edit of the system task: reap every 2 s instead of every minute.
    reaper = PeriodicTask.objects.get(name=schedules.REAPER_TASK_NAME)
    assert reaper.task == schedules.REAPER_TASK and reaper.enabled
    reaper.interval, _ = IntervalSchedule.objects.get_or_create(every=2, period=IntervalSchedule.SECONDS)
    reaper.save()

    celery_processes.start_worker("worker1")
    celery_processes.start_beat()
    celery_processes.wait_for_log("worker1", " ready.")
    run_at = timezone.now() + timedelta(seconds=2)
    tasks = [services.trigger_task_create(owner_id=user.pk, name=name, kind="one_time", run_at=run_at,
                                          action={"instruction": name}) for name in ("Pay rent", "Call mum")]
    llm_server.wait_for_requests(2, timeout=60)
    interrupted = {run.pk: run.worker for run in TriggerRun.objects.filter(task__in=tasks)}
    assert len(interrupted) == 2
    celery_processes.kill("worker1")  # SIGKILL to the whole group: main process and pool children

    celery_processes.start_worker("worker2")

    def all_completed() -> bool:
        return TriggerRun.objects.filter(task__in=tasks, status=TriggerRun.Status.COMPLETED).count() == 2

    wait_until(all_completed, timeout=90, what="the interrupted runs to be recovered")
    assert "Sending due task " + schedules.REAPER_TASK_NAME in celery_processes.log("beat")
    assert "re-queued" in celery_processes.log("worker2")
    # Let the reaper and the broker go round a few more times: nothing runs again.
    offset = len(celery_processes.log("beat"))
    celery_processes.wait_for_log("beat", "Sending due task " + schedules.REAPER_TASK_NAME, after=offset)
    offset = len(celery_processes.log("beat"))
    celery_processes.wait_for_log("beat", "Sending due task " + schedules.REAPER_TASK_NAME, after=offset)

    for task in tasks:
        run = TriggerRun.objects.get(task=task)  # one run per firing
        assert run.status == TriggerRun.Status.COMPLETED and run.attempts == 2
        assert run.result == f"Done: {task.name}" and run.worker != interrupted[run.pk]
        assert Notification.objects.filter(owner=user, title=task.name).count() == 1
        assert Notification.objects.get(owner=user, title=task.name).body == f"Done: {task.name}"
        assert TriggerTask.objects.get(pk=task.pk).status == TriggerTask.Status.COMPLETED
    assert len(llm_server.requests) == 4 and not llm_server.unexpected


@pytest.mark.django_db(transaction=True)
def test_reaper_schedule_is_a_named_system_task_and_requeues_stale_runs(user: Any, eager_celery: Any) -> None:
    """In-process: the sync keeps an operator's choices; the task re-fires only runs past their lease."""
    from triggers.firing import RUN_LEASE
    from triggers.tasks import reap_stale_runs

    reaper = PeriodicTask.objects.get(name=schedules.REAPER_TASK_NAME)  # made by post_migrate
    assert reaper.task == schedules.REAPER_TASK and reaper.interval.every == schedules.REAPER_EVERY_SECONDS
    reaper.enabled = False
    reaper.save()
    schedules.reaper_schedule_sync()
    assert not PeriodicTask.objects.get(name=schedules.REAPER_TASK_NAME).enabled  # operator's choice kept

    task = services.trigger_task_create(owner_id=user.pk, name="n", kind="interval", interval_seconds=60,
                                        executor="notify", action={"message": "m"})
    now = timezone.now()
    stale = TriggerRun.objects.create(task=task, owner=user, run_key="a", scheduled_for=now, status="running",
                                      worker="dead:1", started_at=now, heartbeat_at=now - RUN_LEASE * 2)
    fresh = TriggerRun.objects.create(task=task, owner=user, run_key="b", scheduled_for=now, status="running",
                                      worker="alive:2", started_at=now, heartbeat_at=now)
    assert reap_stale_runs.apply().get() == 1
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.status == "completed" and stale.attempts == 2
    assert fresh.status == "running"
    assert Notification.objects.filter(owner=user).count() == 1


@pytest.mark.django_db(transaction=True)
def test_orchestrator_firings_in_one_process_each_get_a_working_client(user: Any, llm_server: Any,
                                                                        trigger_orchestrator: Any) -> None:
    """Two firings, one process: each ``async_to_sync`` has a new event loop (was "Event loop is closed")."""
    from triggers.tasks import fire_trigger

    llm_server.script(text("first"), text("second"))
    task = services.trigger_task_create(owner_id=user.pk, name="twice", kind="cron", cron="0 * * * *",
                                        action={"instruction": "x"})
    for slot in ("2030-01-01T10:00:00+00:00", "2030-01-01T11:00:00+00:00"):
        assert fire_trigger.apply(kwargs={"task_id": task.pk, "scheduled_for": slot}).get() == "done"
    assert sorted(TriggerRun.objects.filter(task=task).values_list("status", "result")) == [
        ("completed", "first"), ("completed", "second")]


@pytest.mark.django_db(transaction=True)
def test_one_time_tasks_share_a_clocked_schedule_per_second(user: Any) -> None:
    """Beat's prefetch of a thousand distinct clocked rows crashed it on SQLite: rows are shared per second."""
    from django_celery_beat.models import ClockedSchedule

    due = timezone.now().replace(microsecond=0) + timedelta(minutes=5)
    tasks = [services.trigger_task_create(owner_id=user.pk, name=f"r{i}", kind="one_time", executor="notify",
                                          action={"message": "m"}, run_at=due + timedelta(milliseconds=i + 1))
             for i in range(3)]
    clocked_ids = {PeriodicTask.objects.get(pk=task.periodic_task_id).clocked_id for task in tasks}
    assert len(clocked_ids) == 1 and ClockedSchedule.objects.get().clocked_time == due + timedelta(seconds=1)
    assert TriggerTask.objects.get(pk=tasks[1].pk).run_at == due + timedelta(milliseconds=2)  # run key: exact

    services.trigger_task_update(owner_id=user.pk, task_id=tasks[0].pk, run_at=due + timedelta(hours=1))
    assert ClockedSchedule.objects.count() == 2  # the others still use the first instant's row
    for task in tasks:
        services.trigger_task_delete(owner_id=user.pk, task_id=task.pk)
    assert not ClockedSchedule.objects.exists()


@pytest.mark.celery
def test_a_second_beat_refuses_to_start(celery_processes: Any) -> None:
    """Two beats would send every schedule twice; the second one exits and names the first."""
    first = celery_processes.start_beat()
    celery_processes.wait_for_log("beat", "beat: Starting")
    second = celery_processes.start_beat("beat2")
    assert second.wait(timeout=60) == 3
    assert "another celery beat is already running" in celery_processes.log("beat2")
    assert f":{first.pid}" in celery_processes.log("beat2")
    assert first.poll() is None  # the first beat carries on
