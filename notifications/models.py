"""Notifications: short messages for a user from triggers, approvals and the system.

Stored first and pushed to open sockets after commit, so a user who was offline still
finds them in ``GET /api/v1/notifications``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Notification(models.Model):
    class Source(models.TextChoices):
        TRIGGER = "trigger", "Trigger"
        APPROVAL = "approval", "Approval"
        SYSTEM = "system", "System"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500, blank=True, help_text="A site path or URL to open, e.g. /approvals/12/.")
    source = models.CharField(max_length=32, default=Source.SYSTEM, db_index=True,
                              help_text="Who produced it: trigger, approval, system (free text for plugins).")
    data = models.JSONField(default=dict, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # The list query: one owner's rows, unread (read_at IS NULL) first, newest first.
        indexes = [models.Index(fields=["owner", "read_at", "created_at"], name="notif_owner_read_created")]

    def __str__(self) -> str:
        return self.title

    @property
    def is_read(self) -> bool:
        return self.read_at is not None

    def as_event(self) -> dict:
        """The websocket ``notification`` event; the same fields the REST list returns."""
        return {
            "type": "notification",
            "id": self.pk,
            "title": self.title,
            "body": self.body,
            "link": self.link,
            "source": self.source,
            "data": self.data,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }
