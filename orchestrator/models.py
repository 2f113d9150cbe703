"""Conversations, their messages, and the transcript of every loop run.

Every row is owned by a user (``owner``) so each query can be scoped to its owner without
a join; public ids are UUIDs so one user cannot guess another's.
"""

from __future__ import annotations

import uuid
import zoneinfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


def validate_timezone(value: str) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"{value!r} is not a known time zone (e.g. Europe/Berlin)") from None


class UserProfile(models.Model):
    """What the assistant knows of its user before any memory: name and time zone."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="valet_profile")
    display_name = models.CharField(max_length=120, blank=True)
    timezone = models.CharField(max_length=64, default="UTC", validators=[validate_timezone])

    def __str__(self) -> str:
        return self.display_name or self.user.get_username()


class Source(models.TextChoices):
    WEB = "web", "Web chat"
    API = "api", "REST API"
    CLI = "cli", "Terminal"
    TRIGGER = "trigger", "Trigger"
    APPROVAL = "approval", "Approval decision"


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or f"Conversation {str(self.id)[:8]}"


class Message(models.Model):
    """One entry of the LLM-visible history, in OpenAI chat format once rendered."""

    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey("LoopRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)  # assistant: [{id, name, arguments}]
    tool_call_id = models.CharField(max_length=100, blank=True)  # tool: the call it answers
    name = models.CharField(max_length=100, blank=True)  # tool: the tool's name
    is_error = models.BooleanField(default=False)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.WEB)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["conversation", "id"])]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class LoopRun(models.Model):
    """The transcript of one handled message: outcome, totals and one LoopTurn per LLM call."""

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        WAITING_FOR_INPUT = "waiting_for_input"
        WAITING_FOR_APPROVAL = "waiting_for_approval"
        REFUSED = "refused"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="loop_runs")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="runs")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.WEB)
    status = models.CharField(max_length=32, choices=Status.choices, default=Status.RUNNING, db_index=True)
    model = models.CharField(max_length=120, blank=True)
    response = models.TextField(blank=True)
    turns = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    duration_ms = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"Run {str(self.id)[:8]} ({self.status})"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class LoopTurn(models.Model):
    """One LLM call of a run: what went in, what came out, what recovery it needed."""

    run = models.ForeignKey(LoopRun, on_delete=models.CASCADE, related_name="turn_records")
    index = models.PositiveIntegerField()
    input_messages = models.PositiveIntegerField(default=0)
    input_chars = models.PositiveIntegerField(default=0)
    output_text = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    llm_duration_ms = models.PositiveIntegerField(default=0)
    recovery_steps = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="unique_turn_per_run")]


class ToolInvocation(models.Model):
    """One tool or agent-tool call (ToolCallRecord), kept for per-tool statistics."""

    run = models.ForeignKey(LoopRun, on_delete=models.CASCADE, related_name="tool_invocations")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    turn_index = models.PositiveIntegerField()
    tool_call_id = models.CharField(max_length=100)
    name = models.CharField(max_length=100, db_index=True)
    args_summary = models.JSONField(default=dict, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    success = models.BooleanField(default=True)
    result_status = models.CharField(max_length=32, blank=True)
    result_chars = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "turn_index", "id"]
