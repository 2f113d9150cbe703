"""``SendEmailAgent``: sends one email for the user, after the user approved it.

Sending is irreversible, so the agent always stops for approval; the request shows the
recipient, the subject and a preview of the body. Mail goes out through the user's own
SMTP account when one is stored (``credentials`` service ``smtp``: host, port, username,
password, use_tls, from), else through the site's mail settings (``EMAIL_*``). The SMTP
conversation happens in a worker thread, outside any database transaction.
"""

from __future__ import annotations

from typing import Any, ClassVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from orchestrator.agents import AgentResult, InputField, StandardAgent, valet

SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
PREVIEW_CHARS = 280
SMTP_TIMEOUT_SECONDS = 30


def valid_address(value: str) -> str | None:
    """A recipient must at least look like an address; the SMTP server judges the rest."""
    value = value.strip()
    if "@" not in value or value.startswith("@") or value.endswith("@") or any(c.isspace() for c in value):
        return "Invalid email address: it must look like name@example.com"
    return None


@valet
class SendEmailAgent(StandardAgent):
    """Send an email on the user's behalf (to one recipient, with a subject and a body)."""

    input_fields = (
        InputField("recipient", str, "The recipient's email address", validator=valid_address,
                   validator_description="must contain @"),
        InputField("subject", str, "Subject line"),
        InputField("body", str, "The text of the email"),
    )
    editable_fields: ClassVar[tuple[str, ...]] = ("recipient", "subject", "body")

    def needs_approval(self) -> bool:
        return True

    def approval_summary(self) -> tuple[str, dict[str, Any]]:
        body = str(self.fields.get("body", ""))
        preview = body if len(body) <= PREVIEW_CHARS else body[:PREVIEW_CHARS].rstrip() + "…"
        return (f"Send email to {self.fields.get('recipient')}",
                {"recipient": self.fields.get("recipient"), "subject": self.fields.get("subject"),
                 "body_preview": preview})

    async def on_running(self) -> AgentResult:
        stored = None
        if self.context is not None and self.context.credentials is not None:
            stored = await self.context.credentials.get(self.context.tenant_id, "smtp")
        message = build_message(self.fields, stored)
        sent = await sync_to_async(message.send, thread_sensitive=False)(fail_silently=False)
        if not sent:
            return AgentResult.error(f"The mail server did not accept the email to {self.fields['recipient']}.")
        return AgentResult.completed(
            f"Email sent to {self.fields['recipient']} (subject: {self.fields['subject']}).",
            recipient=self.fields["recipient"])


def build_message(fields: dict[str, Any], stored: dict[str, Any] | None) -> EmailMessage:
    """The email and the connection it goes through: the user's SMTP account, else the site's."""
    if stored:
        connection = get_connection(
            SMTP_BACKEND, host=stored.get("host"), port=int(stored.get("port") or 587),
            username=stored.get("username") or "", password=stored.get("password") or "",
            use_tls=_truthy(stored.get("use_tls", True)), timeout=SMTP_TIMEOUT_SECONDS)
        sender = stored.get("from") or stored.get("username") or settings.DEFAULT_FROM_EMAIL
    elif settings.EMAIL_HOST:
        connection = get_connection(
            SMTP_BACKEND, host=settings.EMAIL_HOST, port=settings.EMAIL_PORT, username=settings.EMAIL_HOST_USER,
            password=settings.EMAIL_HOST_PASSWORD, use_tls=settings.EMAIL_USE_TLS, timeout=SMTP_TIMEOUT_SECONDS)
        sender = settings.DEFAULT_FROM_EMAIL
    else:  # no mail server configured: the site's backend (the console in development)
        connection, sender = get_connection(), settings.DEFAULT_FROM_EMAIL
    return EmailMessage(subject=str(fields["subject"]), body=str(fields["body"]), from_email=sender,
                        to=[str(fields["recipient"]).strip()], connection=connection)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)
