"""The expiry task: unanswered requests expire, their agents leave the pool, the user is told;
its beat schedule is this one system task, synced by name."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals import services
from approvals.models import ApprovalRequest
from approvals.selectors import list_pending_approvals
from approvals.tasks import expire_approvals
from notifications.models import Notification
from orchestrator.models import LoopRun
from pool.models import AgentPoolEntry
from tests.approvals.test_flow import ALICE, two_emails
from tests.llm_server import text

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_expiry_marks_expired_cleans_the_pool_and_notifies(orchestrator: Any, llm_server: Any, user: Any,
                                                           smtp_inbox: Any) -> None:
    outcome = two_emails(orchestrator, llm_server, user)
    first, second = (a["approval_id"] for a in outcome.result.pending_approvals)
    assert len(list_pending_approvals(user.pk)) == 2
    ApprovalRequest.objects.filter(id=first).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert expire_approvals.apply().get() == 1
    expired = ApprovalRequest.objects.get(id=first)
    assert expired.status == "expired" and expired.outcome == "expired" and expired.channel == "system"
    assert [str(r.id) for r in list_pending_approvals(user.pk)] == [second]
    assert AgentPoolEntry.objects.count() == 1
    assert Notification.objects.filter(owner=user, source="approval", title="An approval request expired").exists()
    assert expire_approvals.apply().get() == 0  # nothing left to expire; idempotent

    # The other request of the batch is approved later: the loop continues with both results.
    llm_server.script(text("Alice's email expired; Bob's is sent."))
    services.approval_decide(owner_id=user.pk, request_id=second, decision="approve", channel="rest",
                             actor_id=user.pk)
    contents = [m["content"] for m in llm_server.requests[-1].messages[-2:]]
    assert contents == [services.EXPIRED_RESULT, "Email sent to bob@example.com (subject: Report)."]
    assert [rcpt for rcpt, *_ in smtp_inbox.summary()] == ["bob@example.com"]
    assert AgentPoolEntry.objects.count() == 0
    assert LoopRun.objects.get(source="approval").response == "Alice's email expired; Bob's is sent."


def test_a_batch_that_only_expired_is_not_continued(orchestrator: Any, llm_server: Any, user: Any) -> None:
    two_emails(orchestrator, llm_server, user)
    ApprovalRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_approvals.apply().get() == 2
    assert AgentPoolEntry.objects.count() == 0 and not LoopRun.objects.filter(source="approval").exists()
    assert ALICE["recipient"] in ApprovalRequest.objects.order_by("created_at").first().action_summary


def test_expiry_schedule_is_synced_by_name_only() -> None:
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every = IntervalSchedule.objects.create(every=7, period=IntervalSchedule.DAYS)
    PeriodicTask.objects.create(name="someone's trigger", task="triggers.tasks.run", interval=every)
    PeriodicTask.objects.filter(name=services.EXPIRY_TASK_NAME).update(task="something.else")
    services.approval_expiry_schedule_sync()
    services.approval_expiry_schedule_sync()
    task = PeriodicTask.objects.get(name=services.EXPIRY_TASK_NAME)
    assert task.task == "approvals.tasks.expire_approvals" and task.interval.every == services.EXPIRY_EVERY_MINUTES
    assert PeriodicTask.objects.get(name="someone's trigger").task == "triggers.tasks.run"
