"""Admin of trigger tasks, owner-scoped for staff, with run history and deliveries inline.

Saving goes through the services, so an admin edit of a crontab updates the ``PeriodicTask``
(and beat's DatabaseScheduler sees the change without a restart). django-celery-beat's own
``PeriodicTask`` admin would let any staff member run any task with arbitrary arguments —
e.g. fire another user's trigger — so it is kept for superusers only.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest
from django_celery_beat import admin as beat_admin
from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule, PeriodicTask, SolarSchedule

from onevalet_site.errors import OneValetError
from triggers import services
from triggers.firing import trigger_task_run_now
from triggers.models import NotificationDelivery, TriggerRun, TriggerTask


class SuperuserOnlyMixin:
    """Beat's raw tables: visible and editable to superusers only."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_active and request.user.is_superuser

    has_change_permission = has_add_permission = has_delete_permission = has_view_permission


for _model, _base in ((PeriodicTask, beat_admin.PeriodicTaskAdmin), (CrontabSchedule, beat_admin.CrontabScheduleAdmin),
                      (IntervalSchedule, admin.ModelAdmin), (ClockedSchedule, beat_admin.ClockedScheduleAdmin),
                      (SolarSchedule, admin.ModelAdmin)):
    if admin.site.is_registered(_model):
        admin.site.unregister(_model)
    admin.site.register(_model, type(f"Restricted{_model.__name__}Admin", (SuperuserOnlyMixin, _base), {}))


class TriggerRunInline(admin.TabularInline):
    model = TriggerRun
    extra = 0
    can_delete = False
    fields = ["scheduled_for", "trigger_type", "status", "late", "attempts", "started_at", "finished_at", "result",
              "error", "loop_run"]
    readonly_fields = fields
    ordering = ["-scheduled_for"]
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TriggerTaskForm(forms.ModelForm):
    class Meta:
        model = TriggerTask
        fields = ["owner", "name", "kind", "executor", "action", "output", "cron", "interval_seconds", "run_at",
                  "missed_run_policy", "event_source", "event_type", "event_filter", "condition", "cooldown_seconds"]


@admin.register(TriggerTask)
class TriggerTaskAdmin(admin.ModelAdmin):
    form = TriggerTaskForm
    list_display = ["name", "owner", "kind", "status", "executor", "next_run_at", "last_run_at"]
    list_filter = ["kind", "status", "executor"]
    search_fields = ["name", "owner__username"]
    readonly_fields = ["status", "timezone", "periodic_task", "conversation", "last_run_at", "next_run_at",
                       "last_state", "last_fired_at", "created_at", "updated_at"]
    inlines = [TriggerRunInline]
    actions = ["pause_tasks", "resume_tasks", "run_now"]

    def get_queryset(self, request: HttpRequest) -> Any:
        queryset = super().get_queryset(request).select_related("owner", "periodic_task")
        return queryset if request.user.is_superuser else queryset.filter(owner=request.user)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "owner" and not request.user.is_superuser:
            kwargs["queryset"] = db_field.remote_field.model.objects.filter(pk=request.user.pk)
            kwargs["initial"] = request.user.pk
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fixed = ["kind"] if obj is not None else []
        return [*self.readonly_fields, *fixed, *(["owner"] if obj is not None else [])]

    def save_model(self, request: HttpRequest, obj: TriggerTask, form: forms.ModelForm, change: bool) -> None:
        """Through the services: validation, the owner's time zone, the PeriodicTask in step."""
        owner_id = obj.owner_id if request.user.is_superuser else request.user.pk
        values = {name: form.cleaned_data[name] for name in services.EDITABLE_FIELDS if name in form.cleaned_data}
        try:
            if change:
                saved = services.trigger_task_update(owner_id=owner_id, task_id=obj.pk, **values)
            else:
                saved = services.trigger_task_create(owner_id=owner_id, kind=form.cleaned_data["kind"], **values)
        except OneValetError as exc:
            raise forms.ValidationError(exc.message) from exc
        obj.pk = saved.pk
        obj.refresh_from_db()

    def _changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            return super()._changeform_view(request, *args, **kwargs)
        except forms.ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), level=messages.ERROR)
            from django.http import HttpResponseRedirect

            return HttpResponseRedirect(request.get_full_path())

    def delete_model(self, request: HttpRequest, obj: TriggerTask) -> None:
        services.trigger_task_delete(owner_id=obj.owner_id, task_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for task in queryset:
            services.trigger_task_delete(owner_id=task.owner_id, task_id=task.pk)

    def _each(self, request: HttpRequest, queryset: Any, service: Any, verb: str) -> None:
        done = 0
        for task in queryset:
            try:
                with transaction.atomic():
                    service(owner_id=task.owner_id, task_id=task.pk)
                done += 1
            except OneValetError as exc:
                self.message_user(request, f"{task.name}: {exc.message}", level=messages.WARNING)
        self.message_user(request, f"{verb} {done} task(s).")

    @admin.action(description="Pause selected tasks")
    def pause_tasks(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, services.trigger_task_pause, "Paused")

    @admin.action(description="Resume selected tasks")
    def resume_tasks(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, services.trigger_task_resume, "Resumed")

    @admin.action(description="Run selected tasks now")
    def run_now(self, request: HttpRequest, queryset: Any) -> None:
        self._each(request, queryset, trigger_task_run_now, "Queued")


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(admin.ModelAdmin):
    list_display = ["title", "owner", "channel", "status", "attempts", "created_at", "sent_at"]
    list_filter = ["channel", "status"]
    readonly_fields = ["owner", "task", "run", "channel", "target", "title", "body", "link", "data", "status",
                       "attempts", "last_error", "created_at", "sent_at"]

    def get_queryset(self, request: HttpRequest) -> Any:
        queryset = super().get_queryset(request)
        return queryset if request.user.is_superuser else queryset.filter(owner=request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
