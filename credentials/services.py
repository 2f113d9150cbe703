"""Writes of credentials: save (create or replace), delete, and key rotation.

Log lines name the owner, service, account and key names — never a value or a token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from credentials import crypto
from credentials.models import DEFAULT_ACCOUNT, Credential
from credentials.selectors import tenant_pk
from credentials.validators import check_name
from onevalet_site.errors import NotFound

logger = logging.getLogger("onevalet.credentials")


def credential_save(
    *, owner_id: Any, service: str, credentials: dict[str, Any], account_name: str = DEFAULT_ACCOUNT
) -> tuple[Credential, bool]:
    """Store ``credentials`` for (owner, service, account), replacing any previous value.

    Returns the row and whether it was created. Token refreshes by tools and re-connects
    from the app both land here, so replacing is the normal case, not an error.
    """
    pk = tenant_pk(owner_id)
    check_name(service, field="service")
    check_name(account_name, field="account_name")
    if not get_user_model().objects.filter(pk=pk).exists():
        raise NotFound("No such user.")
    # Two first saves can race to insert; the loser's IntegrityError means the row now
    # exists, and the second attempt replaces it under its row lock.
    for attempt in range(2):
        try:
            with transaction.atomic():
                credential = (
                    Credential.objects.select_for_update()
                    .filter(owner_id=pk, service=service, account_name=account_name)
                    .first()
                )
                created = credential is None
                if credential is None:
                    credential = Credential(owner_id=pk, service=service, account_name=account_name)
                credential.set_value(credentials)
                credential.save()
            break
        except IntegrityError:
            if attempt:
                raise
    logger.info(
        "credential %s: owner=%s service=%s account=%s keys=%s",
        "created" if created else "replaced", pk, service, account_name, ",".join(credential.key_names),
    )
    return credential, created


def credential_set_value(*, credential: Credential, credentials: dict[str, Any]) -> Credential:
    """Seal a new value into ``credential`` (new or existing) and save it — the admin's write."""
    credential.set_value(credentials)
    credential.save()
    logger.info(
        "credential value set: owner=%s service=%s account=%s keys=%s",
        credential.owner_id, credential.service, credential.account_name, ",".join(credential.key_names),
    )
    return credential


def credential_delete(*, owner_id: Any, service: str, account_name: str = DEFAULT_ACCOUNT) -> bool:
    """Delete the owner's credential; ``False`` when there was none (or it is not theirs)."""
    pk = tenant_pk(owner_id)
    deleted, _ = Credential.objects.filter(owner_id=pk, service=service, account_name=account_name).delete()
    if deleted:
        logger.info("credential deleted: owner=%s service=%s account=%s", pk, service, account_name)
    return bool(deleted)


@dataclass
class RotationBatch:
    """What one batch of ``credential_rotate_batch`` did; ``last_pk`` is where to resume."""

    rotated: int = 0
    already_current: int = 0
    changed_meanwhile: int = 0
    failed: list[str] = field(default_factory=list)
    last_pk: int | None = None

    @property
    def seen(self) -> int:
        return self.rotated + self.already_current + self.changed_meanwhile + len(self.failed)


def credential_rotate_batch(*, after_pk: int, batch_size: int, force: bool = False) -> RotationBatch:
    """Re-encrypt up to ``batch_size`` rows with pk > ``after_pk`` with the newest key.

    Rows go in pk order so a stopped run resumes from ``last_pk``. A row the newest key
    already opens is skipped (unless ``force``), so running twice is harmless. Each row is
    written with a conditional UPDATE on its old token: a value saved meanwhile is newer
    (and sealed with the newest key) and must not be overwritten with the rotated old one.
    ``updated_at`` is left alone: rotation changes how a value is stored, not the value.
    Rows that do not decrypt are reported by name and left untouched.
    """
    batch = RotationBatch()
    rows = list(
        Credential.objects.filter(pk__gt=after_pk)
        .order_by("pk")
        .values_list("pk", "owner_id", "service", "account_name", "sealed_value")[:batch_size]
    )
    for pk, owner_id, service, account_name, token in rows:
        batch.last_pk = pk
        binding = crypto.Binding(tenant_id=str(owner_id), service=service, account_name=account_name)
        label = f"pk={pk} owner={owner_id} {binding.label}"
        if not force and crypto.is_sealed_with_newest_key(token):
            try:
                crypto.unseal(token, binding)
            except crypto.CredentialUnreadable as exc:
                batch.failed.append(f"{label} ({exc.reason})")
                continue
            batch.already_current += 1
            continue
        try:
            new_token = crypto.rotate(token, binding)
        except crypto.CredentialUnreadable as exc:
            batch.failed.append(f"{label} ({exc.reason})")
            continue
        if Credential.objects.filter(pk=pk, sealed_value=token).update(sealed_value=new_token):
            batch.rotated += 1
        else:
            batch.changed_meanwhile += 1
    if batch.failed:
        logger.warning("credential rotation: %d row(s) could not be decrypted: %s", len(batch.failed), "; ".join(batch.failed))
    return batch
