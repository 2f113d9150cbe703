"""Reads of credentials. Every query is filtered by its owner: there is no unscoped read.

Only ``credential_value`` decrypts; listing and lookups return rows whose value stays sealed,
so a row that cannot be decrypted never breaks a page or an endpoint that shows metadata.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from credentials.crypto import CredentialUnreadable
from credentials.models import Credential
from onevalet_site.errors import InvalidInput, NotFound

logger = logging.getLogger("onevalet.credentials")


def tenant_pk(tenant_id: Any) -> Any:
    """The user primary key for a ``tenant_id`` given as the pk or its string form.

    Tools receive ``context.tenant_id`` as a string; the pk field converts it, whatever
    type the user model's key is, and a malformed id is the caller's input error.
    """
    target = Credential._meta.get_field("owner").target_field
    try:
        pk = target.to_python(tenant_id)
    except ValidationError:
        pk = None
    if pk is None or isinstance(tenant_id, bool):
        raise InvalidInput("tenant_id is not a valid user id.", details={"field": "tenant_id"})
    return pk


def credential_list(*, owner_id: Any, service: str | None = None) -> QuerySet[Credential]:
    """The owner's credentials, ordered by service and account; the token column is deferred."""
    queryset = Credential.objects.filter(owner_id=tenant_pk(owner_id)).defer("sealed_value")
    if service is not None:
        queryset = queryset.filter(service=service)
    return queryset.order_by("service", "account_name")


def credential_find(*, owner_id: Any, service: str, account_name: str) -> Credential | None:
    return Credential.objects.filter(
        owner_id=tenant_pk(owner_id), service=service, account_name=account_name
    ).first()


def credential_get(*, owner_id: Any, service: str, account_name: str) -> Credential:
    """The owner's credential; ``NotFound`` when missing — another user's looks missing too."""
    credential = credential_find(owner_id=owner_id, service=service, account_name=account_name)
    if credential is None:
        raise NotFound(f"No credentials stored for {service}/{account_name}.")
    return credential


def credential_value(*, owner_id: Any, service: str, account_name: str) -> dict[str, Any] | None:
    """The decrypted value, ``None`` when nothing is stored, ``CredentialUnreadable`` when the
    stored token does not open for this row (logged with its name, never its content)."""
    credential = credential_find(owner_id=owner_id, service=service, account_name=account_name)
    if credential is None:
        return None
    try:
        return credential.reveal()
    except CredentialUnreadable as exc:
        logger.warning(
            "credential unreadable: owner=%s service=%s account=%s reason=%s",
            credential.owner_id, credential.service, credential.account_name, exc.reason,
        )
        raise


def credential_metadata(credential: Credential) -> dict[str, Any]:
    """What may be shown of a credential anywhere: names and dates, never the value."""
    return {
        "service": credential.service,
        "account_name": credential.account_name,
        "keys": list(credential.key_names),
        "created_at": credential.created_at,
        "updated_at": credential.updated_at,
    }
