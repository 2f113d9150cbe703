"""``CredentialStore``: the async face of the credential services for tools and agents.

The orchestrator builds one ``CredentialStore()`` and hands it to every tool as
``context.credentials``; a tool then does ``await context.credentials.get(context.tenant_id,
"google")``. The store holds no state of its own — no keys, no cache of values — so it can
be shared, and its ``repr`` has nothing to leak. Each call runs the sync service or selector
in a worker thread (``sync_to_async``), where Django's ORM is allowed.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async

from credentials import selectors, services
from credentials.models import DEFAULT_ACCOUNT


def _save(tenant_id: Any, service: str, credentials: dict[str, Any], account_name: str) -> None:
    services.credential_save(owner_id=tenant_id, service=service, credentials=credentials, account_name=account_name)


def _list(tenant_id: Any, service: str | None) -> list[dict[str, Any]]:
    return [selectors.credential_metadata(c) for c in selectors.credential_list(owner_id=tenant_id, service=service)]


class CredentialStore:
    """Per-user credential storage: save, get, list (metadata only) and delete.

    ``tenant_id`` is the user's primary key (or its string form); every call is scoped to it.
    ``get`` raises ``CredentialUnreadable`` when a stored value cannot be decrypted for its
    row — a tool should surface that ("reconnect your account"), not treat it as missing.
    """

    def __repr__(self) -> str:
        return "CredentialStore()"

    async def save(
        self, tenant_id: Any, service: str, credentials: dict[str, Any], account_name: str = DEFAULT_ACCOUNT
    ) -> None:
        """Store ``credentials`` for the tenant, replacing what was stored under the same names."""
        await sync_to_async(_save)(tenant_id, service, credentials, account_name)

    async def get(self, tenant_id: Any, service: str, account_name: str = DEFAULT_ACCOUNT) -> dict[str, Any] | None:
        """The stored credentials dict, or ``None`` when the tenant has none for this service/account."""
        return await sync_to_async(selectors.credential_value)(
            owner_id=tenant_id, service=service, account_name=account_name
        )

    async def list(self, tenant_id: Any, service: str | None = None) -> list[dict[str, Any]]:
        """The tenant's connected accounts: service, account_name, key names and dates — no values."""
        return await sync_to_async(_list)(tenant_id, service)

    async def delete(self, tenant_id: Any, service: str, account_name: str = DEFAULT_ACCOUNT) -> bool:
        """Delete the tenant's credentials; ``True`` when something was deleted."""
        return await sync_to_async(services.credential_delete)(
            owner_id=tenant_id, service=service, account_name=account_name
        )
