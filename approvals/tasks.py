"""Celery tasks of the approvals app; thin: they take ids and call services.

Neither task retries on its own: execution is claimed once (at most once is the promise
for irreversible actions) and the expiry is periodic, so the next beat retries it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from asgiref.sync import async_to_sync
from celery import shared_task

from approvals import services

if TYPE_CHECKING:
    from orchestrator.orchestrator import Orchestrator

logger = logging.getLogger("onevalet.approvals")


@shared_task(name="approvals.tasks.execute_approved_action", ignore_result=True)
def execute_approved_action(request_id: str) -> str | None:
    """Run a decided request (approve, edit or cancel), then continue its conversation when
    the request's whole batch has results. Returns the outcome, or None if another worker had it.
    """
    from orchestrator.orchestrator import get_orchestrator

    return async_to_sync(_execute_and_continue)(request_id, get_orchestrator())


async def _execute_and_continue(request_id: str, orchestrator: Orchestrator) -> str | None:
    from approvals.execution import approval_execute
    from approvals.flowback import continue_after_approvals

    action = await approval_execute(request_id=request_id, tools=orchestrator.tools,
                                    credentials=orchestrator.credentials, config=orchestrator.config)
    if action is None:
        return None
    if action.run_id:
        await continue_after_approvals(run_id=action.run_id, orchestrator=orchestrator)
    return action.outcome


@shared_task(name="approvals.tasks.expire_approvals", ignore_result=True)
def expire_approvals() -> int:
    """Periodic (django-celery-beat, ``approval_expiry_schedule_sync``): expire unanswered requests.

    Each expired request's agent is cancelled and leaves the pool, the user is told, and a
    batch whose other requests were decided is continued; decided requests whose execution
    was never enqueued (a lost process) are enqueued again.
    """
    expired = services.approvals_expire()
    for item in expired:
        _clean_up(item)
    for run_id in {item.run_id for item in expired if item.run_id}:
        continue_batch.delay(str(run_id))
    services.approvals_recover_unexecuted()
    return len(expired)


def _clean_up(item: services.ExpiredRequest) -> None:
    from notifications.services import notification_create
    from pool.services import pool_entry_cancel

    if item.pool_entry_id:
        pool_entry_cancel(entry_id=item.pool_entry_id, owner_id=item.owner_id)
    notification_create(owner_id=item.owner_id, title="An approval request expired",
                        body=f"{item.action_summary}: nobody answered in time, so it was not done.",
                        link=f"/approvals/{item.id}/", source="approval",
                        data={"approval": str(item.id), "status": "expired"})


@shared_task(name="approvals.tasks.continue_batch", ignore_result=True)
def continue_batch(run_id: str) -> bool:
    """Continue a conversation whose approval batch got its last result from the expiry."""
    from approvals.flowback import continue_after_approvals
    from orchestrator.orchestrator import get_orchestrator

    outcome = async_to_sync(continue_after_approvals)(run_id=run_id, orchestrator=get_orchestrator())
    return outcome is not None

