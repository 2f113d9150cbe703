"""Admin of the pool: paused agents, filterable, with cancel / expire actions.

Rows are read-only here (an agent's state is its own business); staff who are not
superusers see only their own paused agents. Actions go through the pool services.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from pool.models import AgentPoolEntry
from pool.services import pool_entry_cancel, pool_entry_expire_now


@admin.register(AgentPoolEntry)
class AgentPoolEntryAdmin(admin.ModelAdmin):
    list_display = ("agent_type", "status", "owner", "conversation", "created_at", "expires_at")
    list_filter = ("status", "agent_type", "owner")
    search_fields = ("agent_type", "question")
    ordering = ("-created_at",)
    actions = ("cancel_entries", "expire_entries")
    readonly_fields = ("id", "owner", "agent_type", "status", "schema_version", "collected_fields", "state", "errors",
                       "question", "task_instruction", "conversation", "tool_call_id", "run", "created_at",
                       "updated_at", "expires_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentPoolEntry]:
        rows = super().get_queryset(request).select_related("owner", "conversation")
        return rows if request.user.is_superuser else rows.filter(owner_id=request.user.pk)

    def get_list_filter(self, request: HttpRequest) -> Any:
        return self.list_filter if request.user.is_superuser else ("status", "agent_type")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # entries come from agents that are waiting, never from a form

    def has_change_permission(self, request: HttpRequest, obj: AgentPoolEntry | None = None) -> bool:
        return False

    @admin.action(description="Cancel the selected paused agents", permissions=["delete"])
    def cancel_entries(self, request: HttpRequest, queryset: QuerySet[AgentPoolEntry]) -> None:
        count = sum(pool_entry_cancel(entry_id=e.id, owner_id=e.owner_id) for e in queryset)
        self.message_user(request, f"Cancelled {count} paused agent(s).", messages.SUCCESS)

    @admin.action(description="Expire the selected paused agents now", permissions=["delete"])
    def expire_entries(self, request: HttpRequest, queryset: QuerySet[AgentPoolEntry]) -> None:
        count = sum(pool_entry_expire_now(entry_id=e.id, owner_id=e.owner_id) for e in queryset)
        self.message_user(request, f"Expired {count} paused agent(s); they will not be resumed.", messages.SUCCESS)
