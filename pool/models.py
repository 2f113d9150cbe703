"""``AgentPoolEntry``: an agent paused mid-task, waiting for its user's next message.

The row holds the agent's whole resumable state as JSON plus the schema version of the
class that wrote it; the pool keeps only non-terminal agents (finished or cancelled ones
are deleted) and every row expires.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class AgentPoolEntry(models.Model):
    class Status(models.TextChoices):
        WAITING_FOR_INPUT = "waiting_for_input", "Waiting for input"
        WAITING_FOR_APPROVAL = "waiting_for_approval", "Waiting for approval"
        RUNNING = "running", "Running (claimed by a process)"

    WAITING = (Status.WAITING_FOR_INPUT, Status.WAITING_FOR_APPROVAL)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pool_entries")
    agent_type = models.CharField(max_length=100, db_index=True)
    status = models.CharField(max_length=32, choices=Status.choices, db_index=True)
    # The agent's own status (input or approval), kept while ``status`` says RUNNING during a claim.
    agent_status = models.CharField(max_length=32, choices=Status.choices[:2])
    schema_version = models.CharField(max_length=64)
    collected_fields = models.JSONField(default=dict, blank=True)
    state = models.JSONField(default=dict, blank=True)  # the agent's own ``self.state``
    errors = models.JSONField(default=dict, blank=True)  # field -> why the last value was refused
    question = models.TextField(blank=True)  # what the user was last asked
    task_instruction = models.TextField(blank=True)
    conversation = models.ForeignKey("orchestrator.Conversation", on_delete=models.CASCADE,
                                     related_name="pool_entries")
    tool_call_id = models.CharField(max_length=100, blank=True)
    run = models.ForeignKey("orchestrator.LoopRun", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="pool_entries")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField()  # set by the services (queryset.update skips auto_now)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["created_at"]
        verbose_name = "paused agent"
        indexes = [models.Index(fields=["owner", "conversation", "status"], name="pool_owner_conv_status")]

    def __str__(self) -> str:
        return f"{self.agent_type} ({self.status})"

    def snapshot(self) -> dict:
        """The agent's state in the shape ``StandardAgent.restore`` takes."""
        return {"fields": self.collected_fields, "state": self.state, "status": self.agent_status,
                "question": self.question, "errors": self.errors, "task_instruction": self.task_instruction}
