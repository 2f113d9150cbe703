"""Input and output shapes of the triggers REST API (validation of meaning lives in services)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import serializers

from triggers.models import TriggerRun, TriggerTask

MAX_EVENT_DATA_BYTES = int(getattr(settings, "TRIGGERS_MAX_EVENT_BYTES", 64 * 1024))


class TriggerTaskInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=TriggerTask.Kind.choices)
    executor = serializers.CharField(max_length=64, default="orchestrator")
    action = serializers.DictField(default=dict, help_text='{"instruction": "..."} or executor config.')
    output = serializers.DictField(default=dict, help_text='{"channels": ["inbox", "email", "webhook"], '
                                                           '"webhook_url": "https://..."}')
    cron = serializers.CharField(max_length=120, required=False, allow_blank=True)
    interval_seconds = serializers.IntegerField(required=False, allow_null=True, min_value=1)
    run_at = serializers.DateTimeField(required=False, allow_null=True)
    missed_run_policy = serializers.ChoiceField(choices=TriggerTask.MissedRunPolicy.choices, required=False)
    event_source = serializers.CharField(max_length=100, required=False, allow_blank=True)
    event_type = serializers.CharField(max_length=100, required=False, allow_blank=True)
    event_filter = serializers.DictField(required=False)
    condition = serializers.DictField(required=False, help_text='{"check": name, "params": {}, "op": "lt", "value": 1}')
    cooldown_seconds = serializers.IntegerField(required=False, min_value=0)


class TriggerTaskPatch(TriggerTaskInput):
    """Every field optional; ``kind`` cannot change (delete and create instead)."""

    kind = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, partial=True, **kwargs)


class TriggerTaskOutput(serializers.ModelSerializer):
    class Meta:
        model = TriggerTask
        fields = ["id", "name", "kind", "executor", "action", "output", "status", "cron", "interval_seconds",
                  "run_at", "timezone", "missed_run_policy", "event_source", "event_type", "event_filter",
                  "condition", "cooldown_seconds", "last_state", "last_run_at", "next_run_at", "created_at",
                  "updated_at"]


class TriggerRunOutput(serializers.ModelSerializer):
    class Meta:
        model = TriggerRun
        fields = ["id", "run_key", "scheduled_for", "trigger_type", "status", "late", "attempts", "started_at",
                  "finished_at", "result", "error", "loop_run"]


class EventInput(serializers.Serializer):
    source = serializers.RegexField(r"^[\w.:-]{1,100}$", help_text="Who emitted it, e.g. mail, calendar.")
    type = serializers.RegexField(r"^[\w.:-]{1,100}$", help_text="What happened, e.g. email.received.")
    data = serializers.DictField(default=dict)

    def validate_data(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_EVENT_DATA_BYTES:
            raise serializers.ValidationError(f"data must be at most {MAX_EVENT_DATA_BYTES} bytes of JSON")
        return value


class EventOutput(serializers.Serializer):
    id = serializers.CharField()
