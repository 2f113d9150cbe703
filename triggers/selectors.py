"""Reads of the triggers app, every one scoped to an owner unless it is the engine's own."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from onevalet_site.errors import NotFound
from triggers.models import TriggerRun, TriggerTask


def trigger_task_list(*, owner_id: int, status: str | None = None, kind: str | None = None) -> QuerySet[TriggerTask]:
    queryset = TriggerTask.objects.filter(owner_id=owner_id).select_related("periodic_task")
    if status:
        queryset = queryset.filter(status=status)
    if kind:
        queryset = queryset.filter(kind=kind)
    return queryset


def trigger_task_get(*, owner_id: int, task_id: int, for_update: bool = False) -> TriggerTask:
    """The owner's task; another user's task looks exactly like a missing one."""
    queryset = TriggerTask.objects.filter(owner_id=owner_id)
    if for_update:
        queryset = queryset.select_for_update(of=("self",))
    try:
        return queryset.select_related("periodic_task").get(pk=task_id)
    except (TriggerTask.DoesNotExist, ValueError, TypeError):
        raise NotFound("No such trigger.", code="trigger_not_found") from None


def trigger_task_find(*, owner_id: int, reference: str) -> TriggerTask:
    """A task by id or by (case-insensitive) name, for the assistant's "cancel my X"."""
    reference = str(reference).strip().lstrip("#")
    if reference.isdigit():
        return trigger_task_get(owner_id=owner_id, task_id=int(reference))
    matches = list(TriggerTask.objects.filter(owner_id=owner_id, name__iexact=reference)[:2]) or list(
        TriggerTask.objects.filter(owner_id=owner_id, name__icontains=reference)
        .exclude(status__in=[TriggerTask.Status.COMPLETED, TriggerTask.Status.EXPIRED])[:2])
    if len(matches) != 1:
        raise NotFound(f"no single trigger matches {reference!r}" + (" (several do)" if matches else ""),
                       code="trigger_not_found")
    return matches[0]


def trigger_run_list(*, owner_id: int, task_id: int) -> QuerySet[TriggerRun]:
    trigger_task_get(owner_id=owner_id, task_id=task_id)
    return TriggerRun.objects.filter(owner_id=owner_id, task_id=task_id)


def event_tasks_matching(*, source: str, event_type: str, owner_id: int | None) -> QuerySet[TriggerTask]:
    """Active event triggers for this source/type; an owned event only reaches its owner's."""
    queryset = TriggerTask.objects.filter(kind=TriggerTask.Kind.EVENT, status=TriggerTask.Status.ACTIVE,
                                          event_type=event_type).filter(Q(event_source="") | Q(event_source=source))
    if owner_id is not None:
        queryset = queryset.filter(owner_id=owner_id)
    return queryset


def schedule_tasks_active() -> QuerySet[TriggerTask]:
    return TriggerTask.objects.filter(kind__in=TriggerTask.SCHEDULE_KINDS, status=TriggerTask.Status.ACTIVE
                                      ).select_related("periodic_task__crontab", "periodic_task__clocked")
