"""Admin for conversations, runs and their transcripts, with per-tool statistics.

Staff who are not superusers see only their own rows: every changelist is owner-scoped.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone

from orchestrator.models import Conversation, LoopRun, LoopTurn, Message, ToolInvocation, UserProfile
from orchestrator.selectors import tool_stats


class OwnerScopedAdmin(admin.ModelAdmin):
    """Superusers see everything; other staff only what they own."""

    owner_field = "owner"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{self.owner_field: request.user})


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MessageInline(ReadOnlyInline):
    model = Message
    fields = ("created_at", "role", "content", "tool_calls", "name", "is_error", "source")
    readonly_fields = fields


@admin.register(Conversation)
class ConversationAdmin(OwnerScopedAdmin):
    list_display = ("__str__", "owner", "created_at", "updated_at")
    list_filter = (("updated_at", admin.DateFieldListFilter),)
    search_fields = ("title", "owner__username", "id")
    readonly_fields = ("id", "owner", "created_at", "updated_at")
    inlines = [MessageInline]


class LoopTurnInline(ReadOnlyInline):
    model = LoopTurn
    fields = ("index", "input_messages", "input_chars", "input_tokens", "output_tokens", "llm_duration_ms",
              "recovery_steps", "output_text")
    readonly_fields = fields


class ToolInvocationInline(ReadOnlyInline):
    model = ToolInvocation
    fields = ("turn_index", "name", "args_summary", "success", "result_status", "duration_ms", "result_chars",
              "input_tokens", "output_tokens")
    readonly_fields = fields


@admin.register(LoopRun)
class LoopRunAdmin(OwnerScopedAdmin):
    list_display = ("__str__", "owner", "source", "status", "turns", "total_tokens", "duration_ms", "started_at")
    list_filter = ("status", "source", ("started_at", admin.DateFieldListFilter), "owner")
    search_fields = ("id", "owner__username", "response", "conversation__title")
    readonly_fields = [f.name for f in LoopRun._meta.fields]
    inlines = [LoopTurnInline, ToolInvocationInline]
    date_hierarchy = "started_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_urls(self) -> list:
        return [path("tool-stats/", self.admin_site.admin_view(self.tool_stats_view), name="orchestrator_tool_stats"),
                *super().get_urls()]

    def tool_stats_view(self, request: HttpRequest) -> TemplateResponse:
        """Calls, success rate and mean duration per tool, over a chosen window."""
        days = _positive_int(request.GET.get("days"), default=7)
        owner_id = None if request.user.is_superuser else request.user.pk
        stats = tool_stats(since=timezone.now() - timedelta(days=days), owner_id=owner_id)
        context = {**self.admin_site.each_context(request), "title": f"Tool statistics (last {days} days)",
                   "stats": stats, "days": days, "opts": self.model._meta}
        return TemplateResponse(request, "admin/orchestrator/tool_stats.html", context)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        return super().changelist_view(request, {**(extra_context or {}), "show_tool_stats_link": True})


def _positive_int(raw: str | None, *, default: int) -> int:
    try:
        value = int(raw or default)
    except ValueError:
        return default
    return value if value > 0 else default


@admin.register(UserProfile)
class UserProfileAdmin(OwnerScopedAdmin):
    owner_field = "user"
    list_display = ("user", "display_name", "timezone")
    search_fields = ("user__username", "display_name")
