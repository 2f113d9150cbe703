"""Two agents every OneValet ships: reminders and contact cards.

They are small on purpose — each shows one side of the agent machinery: ``ReminderAgent``
turns a loosely typed time into an exact moment in the user's time zone; ``ContactCardAgent``
is a form whose fields are validated one by one and asked for again when wrong.
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime, time, timedelta

from orchestrator.agents import AgentResult, InputField, OutputField, StandardAgent, valet

_CLOCK = re.compile(r"^(?:(today|tomorrow)\s+(?:at\s+)?)?(\d{1,2}):(\d{2})$", re.I)


def resolve_when(value: str, tz: zoneinfo.ZoneInfo, now: datetime | None = None) -> datetime | None:
    """An exact, aware moment for ``value``, or None when it is not a time we read.

    Accepted: ISO 8601 (``2026-05-01T09:30``, with or without an offset; without one it is
    the user's local time) and ``HH:MM`` — today if still ahead, else tomorrow — optionally
    prefixed by ``today`` or ``tomorrow``.
    """
    text = value.strip()
    now = (now or datetime.now(tz)).astimezone(tz)
    match = _CLOCK.match(text)
    if match:
        day, hour, minute = match.group(1), int(match.group(2)), int(match.group(3))
        if hour > 23 or minute > 59:
            return None
        moment = datetime.combine(now.date(), time(hour, minute), tzinfo=tz)
        if (day or "").lower() == "tomorrow" or (not day and moment <= now):
            moment += timedelta(days=1)
        return moment
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=tz) if moment.tzinfo is None else moment


def validate_when(value: str) -> str | None:
    if resolve_when(value, zoneinfo.ZoneInfo("UTC")) is None:
        return f"{value!r} is not a time I can read; use HH:MM (e.g. 18:30), 'tomorrow 08:00' or 2026-05-01T09:30"
    return None


@valet
class ReminderAgent(StandardAgent):
    """Set a one-time reminder for the user: what to be reminded of, and when."""

    input_fields = (
        InputField("what", str, "What to remind the user of, e.g. 'call the dentist'"),
        InputField("when", str, "When to remind them, in the user's time zone", validator=validate_when,
                   validator_description="HH:MM, 'tomorrow HH:MM' or ISO 8601 such as 2026-05-01T09:30"),
    )
    output_fields = (OutputField("remind_at", str, "The exact moment, ISO 8601 with offset"),)

    async def on_running(self) -> AgentResult:
        tz = _user_zone(getattr(self.context, "timezone", "UTC"))
        moment = resolve_when(self.fields["when"], tz)
        if moment is None:  # validated already; only a changed validator could get here
            return AgentResult.error(f"could not read the time {self.fields['when']!r}")
        if moment <= datetime.now(tz):
            return AgentResult.error(f"{moment:%Y-%m-%d %H:%M} is in the past; ask the user for a later time")
        confirmation = await self.schedule_reminder(self.fields["what"], moment)
        return AgentResult.completed(confirmation, remind_at=moment.isoformat())

    async def schedule_reminder(self, what: str, moment: datetime) -> str:
        """A one-time trigger task that notifies the user at ``moment`` (no LLM when it fires)."""
        from asgiref.sync import sync_to_async

        from triggers.models import TriggerTask
        from triggers.services import trigger_task_create

        task = await sync_to_async(trigger_task_create)(
            owner_id=self.context.tenant_id, name=f"Reminder: {what}"[:200], kind=TriggerTask.Kind.ONE_TIME,
            executor="notify", action={"message": f"Reminder: {what}", "title": "Reminder"}, run_at=moment,
            timezone_name=str(moment.tzinfo))
        return f"Reminder #{task.pk} set: '{what}' on {moment:%A %d %B %Y at %H:%M} ({moment.tzinfo})."


def _user_zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return zoneinfo.ZoneInfo("UTC")


def validate_email(value: str) -> str | None:
    local, _, domain = value.strip().partition("@")
    if not local or "." not in domain:
        return f"{value!r} is not an email address"
    return None


def validate_phone(value: str) -> str | None:
    digits = re.sub(r"[\s().-]", "", value)
    if not re.fullmatch(r"\+?\d{6,15}", digits):
        return f"{value!r} is not a phone number (6 to 15 digits, an optional leading +)"
    return None


@valet
class ContactCardAgent(StandardAgent):
    """Create a contact card (vCard) that the user can import into their address book."""

    input_fields = (
        InputField("full_name", str, "The contact's full name"),
        InputField("email", str, "The contact's email address", validator=validate_email,
                   validator_description="must contain @ and a domain"),
        InputField("phone", str, "The contact's phone number", validator=validate_phone,
                   validator_description="digits, optionally with a leading +"),
        InputField("organization", str, "Company or organisation", required=False, default=""),
    )
    output_fields = (OutputField("vcard", str, "The card in vCard 3.0 format"),)

    async def on_running(self) -> AgentResult:
        card = vcard(self.fields["full_name"], self.fields["email"], self.fields["phone"],
                     self.fields.get("organization") or "")
        return AgentResult.completed(f"Contact card for {self.fields['full_name']}:\n{card}", vcard=card)


def vcard(full_name: str, email: str, phone: str, organization: str = "") -> str:
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace(",", "\\,").replace(";", "\\;").replace("\n", "\\n")

    digits = re.sub(r"[\s().-]", "", phone)
    parts = full_name.strip().split()
    family, given = (parts[-1], " ".join(parts[:-1])) if len(parts) > 1 else (full_name.strip(), "")
    lines = ["BEGIN:VCARD", "VERSION:3.0", f"N:{escape(family)};{escape(given)};;;", f"FN:{escape(full_name.strip())}",
             f"EMAIL;TYPE=INTERNET:{email.strip()}", f"TEL;TYPE=CELL:{digits}"]
    if organization:
        lines.append(f"ORG:{escape(organization)}")
    lines.append("END:VCARD")
    return "\n".join(lines)
