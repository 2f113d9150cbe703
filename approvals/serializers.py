"""REST shapes of the approvals app: what clients send and what they get back."""

from __future__ import annotations

from rest_framework import serializers

from approvals.models import ApprovalRequest


class ApprovalOutput(serializers.ModelSerializer):
    class Meta:
        model = ApprovalRequest
        fields = ["id", "agent_name", "action_summary", "details", "preview", "options", "editable_fields",
                  "arguments_hash", "status", "source", "conversation", "tool_call_id", "created_at", "expires_at",
                  "decided_at", "channel", "final_arguments", "executed_at", "outcome", "result"]
        read_only_fields = fields


class DecisionInput(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "edit", "cancel"])
    changes = serializers.DictField(required=False, allow_null=True)


class StatusFilterInput(serializers.Serializer):
    status = serializers.ChoiceField(choices=ApprovalRequest.Status.choices, required=False)
