"""Per-user credentials for the services tools call (OAuth tokens, API keys, ...).

The value is stored only as a Fernet token sealed for its row (see ``credentials.crypto`` for
why this is a plain text column rather than an encrypting field). The names of the value's
keys are kept beside it in clear: they say what kind of credential it is (``access_token``,
``api_key``) so lists and the admin can describe a credential without decrypting it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from credentials import crypto
from credentials.validators import NAME_MAX_LENGTH, check_value, name_validator

DEFAULT_ACCOUNT = "primary"


class Credential(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credentials")
    service = models.CharField(max_length=NAME_MAX_LENGTH, validators=[name_validator])
    account_name = models.CharField(max_length=NAME_MAX_LENGTH, default=DEFAULT_ACCOUNT, validators=[name_validator])
    # A Fernet token of the sealed envelope; never plaintext, never shown anywhere.
    sealed_value = models.TextField(editable=False)
    key_names = models.JSONField(default=list, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["service", "account_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "service", "account_name"], name="credential_unique_owner_service_account"
            )
        ]

    def __str__(self) -> str:
        return f"{self.service}/{self.account_name}"

    def __repr__(self) -> str:
        return f"<Credential {self.pk} owner={self.owner_id} {self.service}/{self.account_name}>"

    @property
    def binding(self) -> crypto.Binding:
        """What the sealed value is bound to: changing any of these needs a new value."""
        return crypto.Binding(
            tenant_id=str(self.owner_id), service=self.service, account_name=self.account_name
        )

    def set_value(self, value: dict[str, Any]) -> None:
        """Validate and seal ``value`` for this row (owner, service, account must be set)."""
        value_json = check_value(value)
        self.sealed_value = crypto.seal(value_json, self.binding)
        self.key_names = sorted(value)

    def reveal(self) -> dict[str, Any]:
        """Decrypt the value; ``CredentialUnreadable`` if it does not open for this row."""
        return crypto.unseal(self.sealed_value, self.binding)

    @property
    def masked(self) -> str:
        """How a value is shown to people: a mask and its key names, never its content."""
        return "•••••••• (" + ", ".join(self.key_names) + ")" if self.key_names else "••••••••"
