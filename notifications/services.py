"""Writes of the notifications app.

``notification_create`` is what triggers, approvals and the system call to tell a user
something. The row is the record; the websocket push is sent only after the transaction
commits (a rolled-back notification must never be shown) and goes through the per-user
event store, so it reaches every open socket of the user from any process, and a socket
that missed it gets it again on resync.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from notifications.models import Notification
from notifications.selectors import notification_get

logger = logging.getLogger("onevalet.notifications")


def notification_create(*, owner_id: int, title: str, body: str, link: str = "", source: str = "system",
                        data: dict[str, Any] | None = None) -> Notification:
    """Store a notification and, after commit, push a ``notification`` event to the user."""
    notification = Notification.objects.create(owner_id=owner_id, title=title[:200], body=body, link=link,
                                               source=source, data=data or {})
    event = notification.as_event()
    transaction.on_commit(lambda: _push(owner_id, event))
    return notification


def _push(owner_id: int, event: dict[str, Any]) -> None:
    """Best effort: the row is committed whatever happens here, and the list API shows it."""
    from orchestrator.event_store import publish_sync

    try:
        publish_sync(owner_id, event)
    except Exception:  # Redis down must not fail the caller's (already committed) work
        logger.exception("could not push notification %s to user %s", event.get("id"), owner_id)


def notification_mark_read(*, owner_id: int, notification_id: int) -> Notification:
    """Mark one of the owner's notifications read (idempotent); another user's is a 404."""
    notification = notification_get(owner_id=owner_id, notification_id=notification_id)
    if notification.read_at is None:
        notification.read_at = timezone.now()
        notification.save(update_fields=["read_at"])
    return notification


def notification_mark_all_read(*, owner_id: int) -> int:
    """Mark every unread notification of the owner read; returns how many changed."""
    return Notification.objects.filter(owner_id=owner_id, read_at__isnull=True).update(read_at=timezone.now())
