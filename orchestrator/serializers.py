"""Input and output shapes of the orchestrator's REST API (also its OpenAPI schema)."""

from __future__ import annotations

from rest_framework import serializers

from orchestrator.models import Conversation, Message


class MessageInput(serializers.Serializer):
    # The length limit is the loop's (max_input_chars) and answers 413, so it is not repeated here.
    content = serializers.CharField(trim_whitespace=False, allow_blank=True,
                                    help_text="What the user says. Empty is refused (400), too long is 413.")
    conversation = serializers.UUIDField(required=False, allow_null=True,
                                         help_text="Continue this conversation; omit to start a new one.")


class ErrorOutput(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField(required=False)


class TokenUsageOutput(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    total = serializers.IntegerField()


class ToolCallOutput(serializers.Serializer):
    tool_call_id = serializers.CharField()
    name = serializers.CharField()
    args_summary = serializers.DictField()
    duration_ms = serializers.IntegerField()
    success = serializers.BooleanField()
    result_status = serializers.CharField(allow_null=True)
    result_chars = serializers.IntegerField()
    turn = serializers.IntegerField()
    token_attribution = TokenUsageOutput(allow_null=True, required=False)


class MessageOutcomeOutput(serializers.Serializer):
    """``MessageOutcome.as_dict()``: what one handled message produced."""

    conversation = serializers.UUIDField()
    run = serializers.UUIDField()
    status = serializers.ChoiceField(choices=["completed", "waiting_for_input", "waiting_for_approval",
                                              "refused", "failed"])
    response = serializers.CharField(allow_blank=True)
    turns = serializers.IntegerField()
    tool_calls = ToolCallOutput(many=True)
    token_usage = TokenUsageOutput()
    duration_ms = serializers.IntegerField()
    pending_approvals = serializers.ListField(child=serializers.DictField())


class ConversationOutput(serializers.ModelSerializer):
    class Meta:
        model = Conversation
        fields = ["id", "title", "created_at", "updated_at"]
        read_only_fields = fields


class MessageOutput(serializers.ModelSerializer):
    class Meta:
        model = Message
        fields = ["id", "role", "content", "tool_calls", "tool_call_id", "name", "is_error", "source", "created_at"]
        read_only_fields = fields
