"""Admin of the approvals app: requests and their append-only decision log, read-only.

Decisions are made through the pages, REST or chat (``approval_decide``), never by editing
rows here, so the audit trail and the execution claim stay truthful.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from approvals.models import ApprovalDecisionAttempt, ApprovalRequest


class AttemptInline(admin.TabularInline):
    model = ApprovalDecisionAttempt
    extra = 0
    can_delete = False
    readonly_fields = ["created_at", "decision", "channel", "actor", "accepted", "reason", "changes"]
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    list_display = ["action_summary", "owner", "agent_name", "status", "channel", "outcome", "created_at",
                    "expires_at"]
    list_filter = ["status", "outcome", "channel", "agent_name"]
    search_fields = ["action_summary", "agent_name", "owner__username"]
    inlines = [AttemptInline]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
