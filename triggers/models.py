"""Proactive triggers: what should run unattended, each time it ran, and how the user heard.

A ``TriggerTask`` is the user's intent (a schedule, an event pattern or a condition plus an
action). Schedules live in django-celery-beat's tables so beat fires them; the task keeps a
OneToOne to its ``PeriodicTask`` and ``triggers.schedules`` is the only code that writes it.
A ``TriggerRun`` is one firing; its unique ``(task, run_key)`` makes a firing happen once
however many times its message is delivered.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TriggerTask(models.Model):
    class Kind(models.TextChoices):
        CRON = "cron", "Cron schedule"
        INTERVAL = "interval", "Every N seconds"
        ONE_TIME = "one_time", "Once, at a time"
        EVENT = "event", "On an event"
        CONDITION = "condition", "When a condition becomes true"

    class Status(models.TextChoices):
        ACTIVE = "active"
        PAUSED = "paused"
        DISABLED = "disabled"
        COMPLETED = "completed"
        PENDING_APPROVAL = "pending_approval"
        EXPIRED = "expired"

    class MissedRunPolicy(models.TextChoices):
        RUN_ONCE = "run_once", "Run once, marked late"
        SKIP = "skip", "Skip"
        ASK = "ask", "Ask me"

    SCHEDULE_KINDS = (Kind.CRON, Kind.INTERVAL, Kind.ONE_TIME)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="trigger_tasks")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    executor = models.CharField(max_length=64, default="orchestrator",
                                help_text='"orchestrator" (the assistant decides) or a registered executor name.')
    action = models.JSONField(default=dict, blank=True, help_text='{"instruction": "..."} or executor config.')
    output = models.JSONField(default=dict, blank=True,
                              help_text='{"channels": ["inbox", "email", "webhook"], "webhook_url": "https://..."}')
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE, db_index=True)
    # Schedule (cron / interval / one_time). The time zone is the owner's when the task was saved.
    cron = models.CharField(max_length=120, blank=True, help_text='Five fields, e.g. "0 8 * * 1-5".')
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    run_at = models.DateTimeField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    missed_run_policy = models.CharField(max_length=16, choices=MissedRunPolicy.choices,
                                         default=MissedRunPolicy.RUN_ONCE)
    # Event triggers.
    event_source = models.CharField(max_length=100, blank=True)
    event_type = models.CharField(max_length=100, blank=True, db_index=True)
    event_filter = models.JSONField(default=dict, blank=True)
    # Condition triggers: {"check": name, "params": {...}, "op": "lt", "value": 500}.
    condition = models.JSONField(default=dict, blank=True)
    cooldown_seconds = models.PositiveIntegerField(default=3600)
    last_state = models.BooleanField(null=True, blank=True)
    last_value = models.JSONField(null=True, blank=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)

    periodic_task = models.OneToOneField("django_celery_beat.PeriodicTask", null=True, blank=True,
                                         on_delete=models.SET_NULL, related_name="trigger_task")
    conversation = models.ForeignKey("orchestrator.Conversation", null=True, blank=True,
                                     on_delete=models.SET_NULL, related_name="+")
    last_run_at = models.DateTimeField(null=True, blank=True)
    next_run_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["owner", "status"]), models.Index(fields=["kind", "status"])]

    def __str__(self) -> str:
        return self.name

    @property
    def is_schedule(self) -> bool:
        return self.kind in self.SCHEDULE_KINDS

    @property
    def instruction(self) -> str:
        return str((self.action or {}).get("instruction", ""))


class TriggerRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        PENDING_APPROVAL = "pending_approval"
        EXPIRED = "expired"
        SKIPPED = "skipped"
        LATE = "late"  # recorded for a missed run the catch-up will fire; becomes completed/failed

    task = models.ForeignKey(TriggerTask, on_delete=models.CASCADE, related_name="runs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # The identity of the firing: the scheduled time (ISO) for schedules, "event:<stream id>"
    # for events, "condition:<time>" for conditions. Unique per task: the exactly-once claim.
    run_key = models.CharField(max_length=120)
    scheduled_for = models.DateTimeField(db_index=True)
    trigger_type = models.CharField(max_length=16, default="schedule")
    payload = models.JSONField(default=dict, blank=True)
    late = models.BooleanField(default=False)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING, db_index=True)
    worker = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.TextField(blank=True)
    error = models.TextField(blank=True)
    loop_run = models.ForeignKey("orchestrator.LoopRun", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")

    class Meta:
        ordering = ["-scheduled_for", "-id"]
        constraints = [models.UniqueConstraint(fields=["task", "run_key"], name="trigger_run_once_per_key")]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"{self.task_id} @ {self.run_key} ({self.status})"


class NotificationDelivery(models.Model):
    """One message on one channel; retried by ``deliver_notification`` until sent or given up."""

    class Channel(models.TextChoices):
        INBOX = "inbox"
        EMAIL = "email"
        WEBHOOK = "webhook"

    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    task = models.ForeignKey(TriggerTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries")
    run = models.ForeignKey(TriggerRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries")
    channel = models.CharField(max_length=16, choices=Channel.choices)
    target = models.CharField(max_length=500, blank=True, help_text="E-mail address or webhook URL.")
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500, blank=True)
    data = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.channel} -> {self.target or self.owner_id} ({self.status})"
