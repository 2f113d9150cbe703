"""A triggered run that stopped for approval finishes when its approval batch is resolved.

The trigger's run waits in PENDING_APPROVAL (spec 15.10). When the user decides and the
conversation is continued, the run completes with the continuation's answer; when nobody
answers before the requests expire, the run is EXPIRED. A one-time task ends with its run;
a recurring task goes back to ACTIVE so its next firing happens as scheduled.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from triggers.models import TriggerRun, TriggerTask

logger = logging.getLogger("onevalet.triggers")

_RUN_STATUS = {
    "completed": TriggerRun.Status.COMPLETED,
    "failed": TriggerRun.Status.FAILED,
    "expired": TriggerRun.Status.EXPIRED,
}


def on_batch_resolved(*, run_id: str, status: str, response: str, continuation_run_id: str | None,
                      **_: Any) -> None:
    with transaction.atomic():
        run = (TriggerRun.objects.select_for_update(of=("self",)).select_related("task")
               .filter(loop_run_id=run_id, status=TriggerRun.Status.PENDING_APPROVAL).first())
        if run is None:
            return  # not a triggered run, or already resolved
        if status not in _RUN_STATUS:
            # The continuation itself stopped for another approval: keep waiting on that run.
            run.loop_run_id = continuation_run_id
            run.save(update_fields=["loop_run"])
            return
        run.status = _RUN_STATUS[status]
        run.result = response or run.result
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "result", "finished_at"])
        _settle_task(run.task, expired=status == "expired")
    logger.info("trigger run %s resolved by its approvals: %s", run.pk, status)


def _settle_task(task: TriggerTask, *, expired: bool) -> None:
    from triggers.services import trigger_task_finish

    task = TriggerTask.objects.select_for_update(of=("self",)).get(pk=task.pk)
    if task.status != TriggerTask.Status.PENDING_APPROVAL:
        return
    if task.kind == TriggerTask.Kind.ONE_TIME:
        trigger_task_finish(task=task, status=TriggerTask.Status.EXPIRED if expired else TriggerTask.Status.COMPLETED)
    else:
        task.status = TriggerTask.Status.ACTIVE
        task.save(update_fields=["status", "updated_at"])
