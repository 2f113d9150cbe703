"""``ApprovalRequest``: one irreversible action waiting for its user's decision.

A request is written when an agent-tool stops for approval; all requests written by one
run (one loop turn — an interruption ends the run) form a batch the user sees together.
The row stores the exact arguments the agent will use (``details``) and their hash; the
decision, the final (possibly edited) arguments and their hash; then the execution claim
and result. ``ApprovalDecisionAttempt`` keeps every attempt to decide — accepted or refused
— as an append-only audit log, so a lost race or a late click is on record too.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models


class ApprovalRequest(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        EDITED = "edited", "Approved with changes"
        CANCELLED = "cancelled", "Cancelled"
        EXPIRED = "expired", "Expired"

    class Channel(models.TextChoices):
        WEB = "web", "Web page"
        REST = "rest", "REST API"
        CHAT = "chat", "Chat reply"
        SYSTEM = "system", "System (expiry)"

    class Outcome(models.TextChoices):
        NONE = "", "Not executed yet"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        REFUSED = "refused", "Refused (arguments changed after the decision)"
        CANCELLED = "cancelled", "Cancelled by the user"
        EXPIRED = "expired", "Expired unanswered"

    DEFAULT_OPTIONS = ["approve", "edit", "cancel"]

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="approval_requests")
    pool_entry = models.ForeignKey("pool.AgentPoolEntry", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="approval_requests")
    conversation = models.ForeignKey("orchestrator.Conversation", on_delete=models.CASCADE,
                                     related_name="approval_requests")
    run = models.ForeignKey("orchestrator.LoopRun", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="approval_requests")  # the batch: every request of one run
    tool_call_id = models.CharField(max_length=100, blank=True)
    source = models.CharField(max_length=16, blank=True)  # the run's source: web, api, trigger...
    agent_name = models.CharField(max_length=100)
    action_summary = models.CharField(max_length=300)
    details = models.JSONField(default=dict)  # the exact arguments that will be used
    preview = models.JSONField(default=dict, blank=True)  # the agent's presentation (e.g. body preview)
    options = models.JSONField(default=list)
    editable_fields = models.JSONField(default=list, blank=True)
    arguments_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    channel = models.CharField(max_length=16, choices=Channel.choices, blank=True)
    final_arguments = models.JSONField(null=True, blank=True)
    final_hash = models.CharField(max_length=64, blank=True)
    # Execution: claimed once by a conditional UPDATE (``execution_claimed_at IS NULL``), so
    # two workers handed the same request run the action at most once.
    execution_claimed_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True, default="")
    result = models.TextField(blank=True)  # what the LLM reads as the tool call's result
    flowback_at = models.DateTimeField(null=True, blank=True)  # the conversation was continued

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "status", "-created_at"], name="approval_owner_status"),
                   models.Index(fields=["status", "expires_at"], name="approval_status_expiry")]

    def __str__(self) -> str:
        return f"{self.action_summary} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING

    def as_pending(self) -> dict[str, Any]:
        """The entry of ``pending_approvals`` in a loop result and in websocket events."""
        return {"approval_id": str(self.id), "agent_name": self.agent_name, "action_summary": self.action_summary,
                "details": self.preview or self.details, "arguments": self.details, "options": self.options,
                "editable_fields": self.editable_fields, "expires_at": self.expires_at.isoformat(),
                "pool_entry": str(self.pool_entry_id) if self.pool_entry_id else "",
                "tool_call_id": self.tool_call_id, "link": f"/approvals/{self.id}/"}


class ApprovalDecisionAttempt(models.Model):
    """One attempt to decide a request, from any door; never updated or deleted by the app."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="attempts")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    decision = models.CharField(max_length=16)
    channel = models.CharField(max_length=16)
    changes = models.JSONField(null=True, blank=True)
    accepted = models.BooleanField()
    reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.decision} via {self.channel} ({'accepted' if self.accepted else 'refused'})"
