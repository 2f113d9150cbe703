"""Notification channels: how a trigger's result reaches its user.

Three concrete channels behind one tiny base class — the inbox (the notifications app:
stored, pushed live to open sockets), e-mail (Django's mail to the user's address) and a
webhook (a JSON POST to a URL the user configured). Every message gets a
``NotificationDelivery`` row per channel. The inbox copy is written at once, in the
caller's transaction, so an offline user always finds everything; e-mail and webhooks are
slow I/O, so they are sent by the ``deliver_notification`` task after commit, retried with
back-off, and every attempt leaves its error on the row.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, ClassVar

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from onevalet_site.errors import InvalidInput
from triggers.models import NotificationDelivery

logger = logging.getLogger("onevalet.triggers.channels")

WEBHOOK_TIMEOUT_SECONDS = float(getattr(settings, "TRIGGERS_WEBHOOK_TIMEOUT", 10.0))


class DeliveryError(Exception):
    """A delivery attempt failed; ``permanent`` ones are not retried (no address, bad URL)."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class NotificationChannel(ABC):
    """One way to reach a user. ``send`` raises ``DeliveryError`` when it did not arrive."""

    name: ClassVar[str]

    @abstractmethod
    def send(self, delivery: NotificationDelivery) -> None:
        """Deliver, or raise ``DeliveryError``."""


class InboxChannel(NotificationChannel):
    name = "inbox"

    def send(self, delivery: NotificationDelivery) -> None:
        from notifications.services import notification_create

        notification_create(owner_id=delivery.owner_id, title=delivery.title, body=delivery.body,
                            link=delivery.link, source="trigger", data=delivery.data)


class EmailChannel(NotificationChannel):
    name = "email"

    def send(self, delivery: NotificationDelivery) -> None:
        if not delivery.target:
            raise DeliveryError("the user has no e-mail address", permanent=True)
        body = delivery.body + (f"\n\n{delivery.link}" if delivery.link else "")
        try:
            send_mail(delivery.title, body, settings.DEFAULT_FROM_EMAIL, [delivery.target])
        except OSError as exc:  # smtplib's errors are OSErrors: refused, timed out, rejected
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from exc


def validate_webhook_url(url: str) -> str:
    """Only absolute http(s) URLs: no file://, no schemes urllib would happily open."""
    parsed = urllib.parse.urlsplit(url or "")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InvalidInput("the webhook URL must be an absolute http:// or https:// URL", code="invalid_webhook")
    return url


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect could lead to another scheme or host than the user configured: refuse it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class WebhookChannel(NotificationChannel):
    name = "webhook"

    def send(self, delivery: NotificationDelivery) -> None:
        try:
            url = validate_webhook_url(delivery.target)
        except InvalidInput as exc:
            raise DeliveryError(exc.message, permanent=True) from None
        payload = json.dumps({"title": delivery.title, "body": delivery.body, "link": delivery.link,
                              "data": delivery.data, "delivery": delivery.pk}).encode()
        request = urllib.request.Request(url, data=payload, method="POST", headers={
            "Content-Type": "application/json", "User-Agent": "OneValet-webhook/1"})
        opener = urllib.request.build_opener(_NoRedirects)
        try:
            with opener.open(request, timeout=WEBHOOK_TIMEOUT_SECONDS) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (urllib.error.URLError, OSError) as exc:
            raise DeliveryError(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from exc
        if not 200 <= status < 300:
            # A 4xx other than 408/429 will not get better by retrying.
            raise DeliveryError(f"HTTP {status}", permanent=400 <= status < 500 and status not in (408, 429))


CHANNELS: dict[str, NotificationChannel] = {c.name: c for c in (InboxChannel(), EmailChannel(), WebhookChannel())}


def validate_output(output: Any) -> dict[str, Any]:
    """Normalise a task's ``output``: known channels, and a valid URL when a webhook is asked for."""
    output = dict(output or {})
    channels = output.get("channels", ["inbox"])
    if not isinstance(channels, list) or not all(isinstance(c, str) for c in channels):
        raise InvalidInput('"channels" must be a list of channel names', code="invalid_output")
    unknown = sorted(set(channels) - set(CHANNELS))
    if unknown:
        raise InvalidInput(f"unknown channel(s) {', '.join(unknown)}; use {', '.join(CHANNELS)}",
                           code="invalid_output")
    if "webhook" in channels:
        validate_webhook_url(str(output.get("webhook_url", "")))
    output["channels"] = list(dict.fromkeys(["inbox", *channels]))
    return output


def notify(*, owner_id: int, title: str, body: str, link: str = "", data: dict[str, Any] | None = None,
           output: dict[str, Any] | None = None, task_id: int | None = None,
           run_id: int | None = None) -> list[NotificationDelivery]:
    """Send a message on the task's channels; call inside the caller's transaction.

    The inbox copy is written now; other channels are queued for after commit.
    """
    output = output or {}
    channels = list(dict.fromkeys(["inbox", *output.get("channels", [])]))
    deliveries = []
    for name in channels:
        target = ""
        if name == "email":
            target = get_user_model().objects.filter(pk=owner_id).values_list("email", flat=True).first() or ""
        elif name == "webhook":
            target = str(output.get("webhook_url", ""))
        delivery = NotificationDelivery.objects.create(
            owner_id=owner_id, task_id=task_id, run_id=run_id, channel=name, target=target,
            title=title[:200], body=body, link=link, data=data or {})
        if name == "inbox":
            CHANNELS["inbox"].send(delivery)
            delivery.status, delivery.attempts, delivery.sent_at = delivery.Status.SENT, 1, timezone.now()
            delivery.save(update_fields=["status", "attempts", "sent_at"])
        else:
            transaction.on_commit(lambda pk=delivery.pk: _enqueue(pk))
        deliveries.append(delivery)
    return deliveries


def _enqueue(delivery_id: int) -> None:
    from triggers.tasks import deliver_notification

    deliver_notification.delay(delivery_id)


def deliver(delivery_id: int, *, final_attempt: bool) -> None:
    """One attempt at a queued delivery; raises ``DeliveryError`` for the task to retry.

    The attempt is counted and its error recorded before raising, so the row shows
    everything that happened even while retries are pending.
    """
    delivery = NotificationDelivery.objects.filter(pk=delivery_id).first()
    if delivery is None or delivery.status != NotificationDelivery.Status.PENDING:
        return  # sent already (a redelivered message) or given up
    delivery.attempts += 1
    try:
        CHANNELS[delivery.channel].send(delivery)
    except DeliveryError as exc:
        delivery.last_error = str(exc)[:2000]
        if exc.permanent or final_attempt:
            delivery.status = NotificationDelivery.Status.FAILED
        delivery.save(update_fields=["attempts", "last_error", "status"])
        logger.warning("delivery %s on %s failed (attempt %s): %s", delivery.pk, delivery.channel,
                       delivery.attempts, exc)
        if not exc.permanent and not final_attempt:
            raise
        return
    delivery.status, delivery.sent_at = NotificationDelivery.Status.SENT, timezone.now()
    delivery.save(update_fields=["attempts", "status", "sent_at", "last_error"])
