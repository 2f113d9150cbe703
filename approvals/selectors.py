"""Reads of the approvals app, each scoped to its owner (another user's request is a 404)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.utils import timezone

from approvals.models import ApprovalRequest
from onevalet_site.errors import NotFound


def list_pending_approvals(owner_id: int, *, conversation_id: Any = None) -> list[ApprovalRequest]:
    """The owner's requests still waiting for a decision (unexpired), oldest first.

    Used by the approvals page, REST and the chat door alike; optionally one conversation's.
    """
    queryset = ApprovalRequest.objects.filter(owner_id=owner_id, status=ApprovalRequest.Status.PENDING,
                                              expires_at__gt=timezone.now())
    if conversation_id is not None:
        queryset = queryset.filter(conversation_id=conversation_id)
    return list(queryset.order_by("created_at"))


def approval_list(*, owner_id: int, status: str | None = None) -> QuerySet[ApprovalRequest]:
    """The owner's requests, pending ones first, then newest first."""
    queryset = ApprovalRequest.objects.filter(owner_id=owner_id)
    if status:
        queryset = queryset.filter(status=status)
    pending_first = Case(When(status=ApprovalRequest.Status.PENDING, then=Value(0)), default=Value(1),
                         output_field=IntegerField())
    return queryset.annotate(_pending_first=pending_first).order_by("_pending_first", "-created_at")


def approval_get(*, owner_id: int, request_id: Any) -> ApprovalRequest:
    try:
        return ApprovalRequest.objects.get(id=request_id, owner_id=owner_id)
    except (ApprovalRequest.DoesNotExist, ValidationError, ValueError, TypeError):
        raise NotFound("No such approval request.") from None
