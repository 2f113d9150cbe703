"""Concurrency: many doors deciding one request, decisions racing the expiry, workers racing
to execute. Exactly one decision wins and the action runs at most once.

On Postgres (``DATABASE_URL``) the threads really write at the same time; SQLite serialises
writers, and must still produce exactly one winner.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.db import connection
from rest_framework.test import APIClient

from approvals import services
from approvals.models import ApprovalDecisionAttempt, ApprovalRequest
from approvals.tasks import execute_approved_action
from onevalet_site.errors import Conflict
from tests.approvals.test_flow import ALICE, ask
from tests.llm_server import text, tool_calls

pytestmark = [pytest.mark.django_db(transaction=True)]
THREADS = 50


def one_request(orchestrator: Any, llm_server: Any, user: Any) -> str:
    llm_server.script(tool_calls(("call_a", "SendEmailAgent", ALICE)), text("Shall I send it?"))
    [pending] = ask(orchestrator, user, "email Alice").result.pending_approvals
    return pending["approval_id"]


def run_together(jobs: list[Callable[[], str]]) -> Counter[str]:
    """Start every job at once (a barrier), each on its own thread and DB connection.

    The test database on SQLite is in-memory with a shared cache, whose table locks fail at
    once instead of waiting ("database table is locked"); there the jobs take turns in
    whatever order the threads reach the lock. On Postgres they run truly at once.
    """
    barrier = threading.Barrier(len(jobs))
    turns = contextlib.nullcontext() if connection.vendor == "postgresql" else threading.Lock()

    def run(job: Callable[[], str]) -> str:
        try:
            barrier.wait()
            with turns:
                return job()
        finally:
            connection.close()

    with ThreadPoolExecutor(len(jobs)) as pool:
        return Counter(pool.map(run, jobs))


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the execution enqueues instead of running them: the races are about decisions."""
    calls: list[str] = []
    monkeypatch.setattr(services, "_enqueue_execution", lambda request_id: calls.append(str(request_id)))
    return calls


def decide_job(user: Any, request_id: str, decision: str, door: str) -> Callable[[], str]:
    changes = {"subject": "Edited"} if decision == "edit" else None

    def job() -> str:
        if door == "web":  # the page's form: approve or cancel (an edit there needs the whole form)
            client = Client()
            client.force_login(user)
            action = "cancel" if decision == "cancel" else "approve"
            status = client.post(f"/approvals/{request_id}/", {"action": action}).status_code
            return {302: "won", 409: "conflict"}.get(status, f"http {status}")
        if door == "rest":
            client = APIClient()
            client.force_authenticate(user)
            body = {"decision": decision, **({"changes": changes} if changes else {})}
            status = client.post(f"/api/v1/approvals/{request_id}/decision", body, format="json").status_code
            return {200: "won", 409: "conflict"}.get(status, f"http {status}")
        try:
            services.approval_decide(owner_id=user.pk, request_id=request_id, decision=decision, changes=changes,
                                     channel="rest", actor_id=user.pk)
        except Conflict:
            return "conflict"
        return "won"

    return job


def test_fifty_concurrent_decisions_have_one_winner(orchestrator: Any, llm_server: Any, user: Any,
                                                    enqueued: list[str]) -> None:
    request_id = one_request(orchestrator, llm_server, user)
    decisions = ["approve", "cancel", "edit"]
    doors = ["rest", "web", "service"]
    jobs = [decide_job(user, request_id, decisions[n % 3], doors[n % 2 + (n % 5 == 0)]) for n in range(THREADS)]
    results = run_together(jobs)
    assert results == Counter({"won": 1, "conflict": THREADS - 1})
    assert enqueued == [request_id]
    attempts = ApprovalDecisionAttempt.objects.filter(request_id=request_id)
    assert attempts.count() == THREADS and attempts.filter(accepted=True).count() == 1
    assert ApprovalRequest.objects.get(id=request_id).status in ("approved", "cancelled", "edited")


def test_decisions_racing_the_expiry_have_one_winner(orchestrator: Any, llm_server: Any, user: Any,
                                                     enqueued: list[str]) -> None:
    request_id = one_request(orchestrator, llm_server, user)
    row = ApprovalRequest.objects.get(id=request_id)
    after_expiry = row.expires_at + timedelta(seconds=1)  # the expiry sees it expired; deciders do not

    def expire() -> str:
        return "won" if services.approvals_expire(now=after_expiry) else "conflict"

    jobs = [decide_job(user, request_id, "approve", "service") for _ in range(20)] + [expire] * 5
    results = run_together(jobs)
    assert results == Counter({"won": 1, "conflict": 24})
    row.refresh_from_db()
    accepted = ApprovalDecisionAttempt.objects.filter(request_id=request_id, accepted=True).count()
    if row.status == "expired":
        assert accepted == 0 and enqueued == [] and row.outcome == "expired"
    else:
        assert row.status == "approved" and accepted == 1 and enqueued == [request_id]


def test_workers_racing_to_execute_run_the_action_once(orchestrator: Any, llm_server: Any, user: Any,
                                                       enqueued: list[str], smtp_inbox: Any) -> None:
    request_id = one_request(orchestrator, llm_server, user)
    services.approval_decide(owner_id=user.pk, request_id=request_id, decision="approve", channel="rest",
                             actor_id=user.pk)
    llm_server.script(text("Sent."))  # one continuation, one LLM call: a second would be unscripted
    results = run_together([lambda: str(execute_approved_action.apply(args=[request_id]).get())] * 8)
    assert results == Counter({"None": 7, "completed": 1})
    assert len(smtp_inbox.messages) == 1
