"""Admin of credentials: metadata and a masked value only; values can be replaced, never read.

* The value is shown as a mask with its key names; the page never decrypts anything.
* A new value is typed into a write-only textarea that renders empty — also when the form
  comes back with an error, so a value just typed is not echoed into the page.
* Owner, service and account are fixed once a credential exists: the sealed value is bound
  to them (see ``credentials.crypto``), so moving it means saving a new value under new names.
* Staff who are not superusers see and manage only their own credentials.
* Every change goes to the admin's LogEntry (field names only) and to a log line.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import ForeignKey, QuerySet
from django.forms import ModelChoiceField
from django.http import HttpRequest

from credentials.models import Credential
from credentials.services import credential_set_value
from credentials.validators import as_validation_error, check_value
from onevalet_site.errors import OneValetError

logger = logging.getLogger("onevalet.credentials")
_INVALID = object()


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value, whatever the form was bound to."""

    def format_value(self, value: Any) -> None:
        return None


class CredentialAdminForm(forms.ModelForm):
    new_value = forms.CharField(
        label="New value",
        required=False,
        strip=True,
        widget=WriteOnlyTextarea(attrs={"rows": 6, "autocomplete": "off", "spellcheck": "false"}),
        help_text='A JSON object, e.g. {"api_key": "..."}. Leave empty to keep the current value; '
        "the stored value is never shown.",
    )

    class Meta:
        model = Credential
        fields = ["owner", "service", "account_name"]

    def clean_new_value(self) -> dict[str, Any] | None:
        raw = self.cleaned_data.get("new_value") or ""
        if not raw:
            if self.instance.pk is None:
                raise forms.ValidationError("A new credential needs a value.", code="required")
            return None
        # Errors are raised outside the handlers: a JSONDecodeError holds the text typed,
        # and it must not ride along as the context of the error we show.
        try:
            value = json.loads(raw)
        except ValueError:
            value = _INVALID
        if value is _INVALID:
            raise forms.ValidationError("This is not valid JSON.", code="invalid_json")
        try:
            check_value(value)
        except OneValetError as exc:
            error = exc
        else:
            return value
        raise as_validation_error(error)


@admin.register(Credential)
class CredentialAdmin(admin.ModelAdmin):
    form = CredentialAdminForm
    list_display = ("service", "account_name", "owner", "masked_value", "updated_at")
    list_filter = ("service",)
    search_fields = (f"owner__{get_user_model().USERNAME_FIELD}", "service", "account_name")
    list_select_related = ("owner",)
    ordering = ("owner", "service", "account_name")

    @admin.display(description="Value")
    def masked_value(self, obj: Credential) -> str:
        return obj.masked

    # --- what the page shows ------------------------------------------------------------
    def get_fields(self, request: HttpRequest, obj: Credential | None = None) -> list[str]:
        if obj is None:
            return ["owner", "service", "account_name", "new_value"]
        return ["owner", "service", "account_name", "masked_value", "new_value", "created_at", "updated_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Credential | None = None) -> list[str]:
        if obj is None:
            return []
        return ["owner", "service", "account_name", "masked_value", "created_at", "updated_at"]

    def formfield_for_foreignkey(self, db_field: ForeignKey, request: HttpRequest, **kwargs: Any) -> ModelChoiceField:
        if db_field.name == "owner" and not request.user.is_superuser:
            kwargs["queryset"] = get_user_model().objects.filter(pk=request.user.pk)
            kwargs["initial"] = request.user.pk
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    # --- who sees what ------------------------------------------------------------------
    def get_queryset(self, request: HttpRequest) -> QuerySet[Credential]:
        queryset = super().get_queryset(request).defer("sealed_value")
        if request.user.is_superuser:
            return queryset
        return queryset.filter(owner_id=request.user.pk)

    def _may_touch(self, request: HttpRequest, obj: Credential | None) -> bool:
        return obj is None or request.user.is_superuser or obj.owner_id == request.user.pk

    def has_view_permission(self, request: HttpRequest, obj: Credential | None = None) -> bool:
        return super().has_view_permission(request, obj) and self._may_touch(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Credential | None = None) -> bool:
        return super().has_change_permission(request, obj) and self._may_touch(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Credential | None = None) -> bool:
        return super().has_delete_permission(request, obj) and self._may_touch(request, obj)

    # --- writes -------------------------------------------------------------------------
    def save_model(self, request: HttpRequest, obj: Credential, form: CredentialAdminForm, change: bool) -> None:
        value = form.cleaned_data.get("new_value")
        if value is None:
            return  # only the value is editable on an existing credential: nothing to save
        credential_set_value(credential=obj, credentials=value)
        logger.info(
            "admin %s %s credential: owner=%s service=%s account=%s",
            request.user.get_username(), "replaced" if change else "added",
            obj.owner_id, obj.service, obj.account_name,
        )

    def delete_model(self, request: HttpRequest, obj: Credential) -> None:
        self._log_deletion(request, obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Credential]) -> None:
        for obj in queryset:
            self._log_deletion(request, obj)
        super().delete_queryset(request, queryset)

    def _log_deletion(self, request: HttpRequest, obj: Credential) -> None:
        logger.info(
            "admin %s deleted credential: owner=%s service=%s account=%s",
            request.user.get_username(), obj.owner_id, obj.service, obj.account_name,
        )
