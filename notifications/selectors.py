"""Reads of the notifications app, each scoped to its owner."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import Case, IntegerField, QuerySet, Value, When

from notifications.models import Notification
from onevalet_site.errors import NotFound


def notification_list(*, owner_id: int, unread_first: bool = True) -> QuerySet[Notification]:
    """The owner's notifications, newest first; unread ones before read ones by default."""
    rows = Notification.objects.filter(owner_id=owner_id)
    if unread_first:
        # An explicit rank rather than ordering on read_at: NULLs sort differently on
        # Postgres and SQLite, and read ones should stay in creation order, not read order.
        unread_rank = Case(When(read_at__isnull=True, then=Value(0)), default=Value(1), output_field=IntegerField())
        return rows.order_by(unread_rank, "-created_at", "-id")
    return rows.order_by("-created_at", "-id")


def notification_get(*, owner_id: int, notification_id: int) -> Notification:
    """Another user's notification looks exactly like a missing one."""
    try:
        return Notification.objects.get(id=notification_id, owner_id=owner_id)
    except (Notification.DoesNotExist, ValidationError, ValueError, TypeError):
        raise NotFound("No such notification.") from None


def notification_unread_count(*, owner_id: int) -> int:
    return Notification.objects.filter(owner_id=owner_id, read_at__isnull=True).count()
