"""Admin of the notifications app: staff see their own rows, superusers everyone's."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from notifications.models import Notification


class ReadFilter(admin.SimpleListFilter):
    title = "read"
    parameter_name = "read"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("no", "Unread"), ("yes", "Read")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "no":
            return queryset.filter(read_at__isnull=True)
        if self.value() == "yes":
            return queryset.filter(read_at__isnull=False)
        return queryset


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["title", "owner", "source", "created_at", "read_at"]
    list_filter = [ReadFilter, "source", "created_at"]
    search_fields = ["title", "body"]
    date_hierarchy = "created_at"
    readonly_fields = ["created_at"]
    raw_id_fields = ["owner"]
    actions = ["mark_read"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        rows = super().get_queryset(request).select_related("owner")
        return rows if request.user.is_superuser else rows.filter(owner=request.user)

    def get_list_filter(self, request: HttpRequest) -> list:
        # The owner filter would list every user's name: superusers only.
        return [*self.list_filter, "owner"] if request.user.is_superuser else self.list_filter

    def save_model(self, request: HttpRequest, obj: Notification, form, change: bool) -> None:
        if not request.user.is_superuser:
            obj.owner = request.user  # staff cannot write into another user's inbox
        super().save_model(request, obj, form, change)

    @admin.action(description="Mark selected notifications read")
    def mark_read(self, request: HttpRequest, queryset: QuerySet) -> None:
        changed = queryset.filter(read_at__isnull=True).update(read_at=timezone.now())
        self.message_user(request, f"{changed} marked read.")
