"""Spec 15.10: a triggered run that needs approval waits for the user, then finishes or expires."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from approvals import services
from approvals.models import ApprovalRequest
from approvals.tasks import expire_approvals
from notifications.models import Notification
from tests.approvals.test_flow import ALICE
from tests.llm_server import text, tool_calls
from triggers import services as trigger_services
from triggers.models import TriggerRun, TriggerTask
from triggers.tasks import fire_trigger

pytestmark = [pytest.mark.django_db(transaction=True)]


def _fire_one_time_task_that_emails(user: Any, llm_server: Any) -> tuple[TriggerTask, TriggerRun, ApprovalRequest]:
    task = trigger_services.trigger_task_create(
        owner_id=user.pk, name="Send the lunch invite", kind="one_time",
        run_at=timezone.now() + timedelta(hours=1), action={"instruction": "Email Alice about lunch."})
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text("Shall I send it?"))
    assert fire_trigger.apply(kwargs={"task_id": task.pk}).get() == "done"
    run = TriggerRun.objects.get(task=task)
    task.refresh_from_db()
    assert run.status == TriggerRun.Status.PENDING_APPROVAL and task.status == TriggerTask.Status.PENDING_APPROVAL
    request = ApprovalRequest.objects.get(owner=user)
    assert request.status == "pending" and request.source == "trigger" and request.details["recipient"] == ALICE[
        "recipient"]
    assert Notification.objects.filter(owner=user, source="trigger", link="/approvals/").exists()
    return task, run, request


def test_approved_trigger_run_completes_with_the_continuations_answer(orchestrator: Any, llm_server: Any,
                                                                     user: Any, smtp_inbox: Any) -> None:
    task, run, request = _fire_one_time_task_that_emails(user, llm_server)
    assert smtp_inbox.messages == []  # nothing is sent while the user has not decided
    llm_server.script(text("I sent Alice the lunch invite."))
    services.approval_decide(owner_id=user.pk, request_id=request.id, decision="approve", channel="rest",
                             actor_id=user.pk)
    assert [(to, subject) for to, subject, _ in smtp_inbox.summary()] == [(ALICE["recipient"], ALICE["subject"])]
    run.refresh_from_db()
    task.refresh_from_db()
    assert run.status == TriggerRun.Status.COMPLETED and run.result == "I sent Alice the lunch invite."
    assert task.status == TriggerTask.Status.COMPLETED


def test_unanswered_trigger_approval_expires_the_run_and_the_one_time_task(orchestrator: Any, llm_server: Any,
                                                                          user: Any, smtp_inbox: Any) -> None:
    task, run, request = _fire_one_time_task_that_emails(user, llm_server)
    ApprovalRequest.objects.filter(id=request.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_approvals.apply().get() == 1
    run.refresh_from_db()
    task.refresh_from_db()
    assert run.status == TriggerRun.Status.EXPIRED and task.status == TriggerTask.Status.EXPIRED
    assert smtp_inbox.messages == []
    assert Notification.objects.filter(owner=user, title="An approval request expired").exists()
