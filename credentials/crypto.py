"""Sealing credential values: Fernet through MultiFernet, bound to the row they belong to.

Why a plain ``TextField`` holding the token and these functions, rather than an
"encrypted JSON" model field that decrypts in ``from_db_value``:

* a field only ever sees its own column, never the row's owner, service and account, so it
  cannot check that a token belongs to the row it was read from — and that binding is what
  stops a ciphertext copied into another user's row from opening for them;
* a field decrypts eagerly on every load, so one unreadable token (a removed key, a tampered
  row) would break every query touching the table, including the admin list and the REST
  list that only show metadata. Decrypting on demand keeps those paths working.

The sealed envelope is ``{"v", "tenant", "service", "account", "data"}`` encrypted as a
whole; Fernet authenticates all of it, so the binding cannot be edited without the key.
``settings.CREDENTIALS_KEYS`` lists Fernet keys newest first: MultiFernet encrypts with the
first and decrypts with any, which is what lets ``rotate_credentials`` move rows to a new key.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from onevalet_site.errors import OneValetError

ENVELOPE_VERSION = 1


@dataclass(frozen=True)
class Binding:
    """Who and what a sealed value belongs to; checked on every decryption."""

    tenant_id: str
    service: str
    account_name: str

    @property
    def label(self) -> str:
        return f"{self.service}/{self.account_name}"


class CredentialUnreadable(OneValetError):
    """A stored credential cannot be decrypted for the row it sits in.

    409: the request was fine, the stored state is not; saving the credential again fixes it.
    The message names the credential and the kind of failure, never any of its content.
    """

    status = 409
    code = "credential_unreadable"

    def __init__(self, binding: Binding, reason: str) -> None:
        super().__init__(
            f"The stored credentials for {binding.label} cannot be decrypted ({reason}); save them again.",
            details={"service": binding.service, "account_name": binding.account_name},
        )
        self.binding = binding
        self.reason = reason

    def __reduce__(self) -> tuple[type[CredentialUnreadable], tuple[Binding, str]]:
        # Pickled across processes (a tool in a worker) with the arguments __init__ takes.
        return (type(self), (self.binding, self.reason))


REASON_NO_KEY = "no configured key opens them, or they were altered or truncated"
REASON_MALFORMED = "the decrypted envelope is malformed"
REASON_WRONG_ROW = "they were sealed for another user, service or account"


@functools.lru_cache(maxsize=8)
def _multi_fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def _keys() -> tuple[str, ...]:
    keys = tuple(settings.CREDENTIALS_KEYS)
    if not keys:
        raise ImproperlyConfigured("CREDENTIALS_KEYS: at least one Fernet key is required")
    return keys


def current_fernet() -> MultiFernet:
    """The MultiFernet of the configured keys, read from settings on each call so that a key
    change (a deploy, a test's ``settings`` override) takes effect without a restart."""
    return _multi_fernet(_keys())


def seal(value_json: str, binding: Binding) -> str:
    """Encrypt a value (its compact JSON, as ``validators.check_value`` returns it) for ``binding``.

    The already-validated JSON is spliced into the envelope rather than parsed and dumped again.
    """
    envelope = (
        '{"v":%d,"tenant":%s,"service":%s,"account":%s,"data":%s}'
        % (
            ENVELOPE_VERSION,
            json.dumps(binding.tenant_id),
            json.dumps(binding.service),
            json.dumps(binding.account_name),
            value_json,
        )
    )
    return current_fernet().encrypt(envelope.encode()).decode("ascii")


def _decrypt(token: str, binding: Binding, fernet: Fernet | MultiFernet) -> bytes:
    try:
        return fernet.decrypt(token.encode("ascii"))
    except (InvalidToken, UnicodeEncodeError):
        pass  # raised below, outside the handler, so no chained exception travels with it
    raise CredentialUnreadable(binding, REASON_NO_KEY)


def _open_envelope(plaintext: bytes, binding: Binding) -> dict[str, Any]:
    try:
        envelope = json.loads(plaintext)
    except ValueError:
        envelope = None  # a JSONDecodeError holds the decrypted text: never let it escape
    if (
        not isinstance(envelope, dict)
        or envelope.get("v") != ENVELOPE_VERSION
        or not isinstance(envelope.get("data"), dict)
    ):
        raise CredentialUnreadable(binding, REASON_MALFORMED)
    sealed_for = (envelope.get("tenant"), envelope.get("service"), envelope.get("account"))
    if sealed_for != (binding.tenant_id, binding.service, binding.account_name):
        raise CredentialUnreadable(binding, REASON_WRONG_ROW)
    return envelope["data"]


def unseal(token: str, binding: Binding, *, fernet: Fernet | MultiFernet | None = None) -> dict[str, Any]:
    """Decrypt ``token`` and return its value, if and only if it was sealed for ``binding``.

    Raises ``CredentialUnreadable`` for a wrong key, a tampered or truncated token, or a
    token sealed for another row. ``fernet`` lets callers check against one key alone.
    """
    return _open_envelope(_decrypt(token, binding, fernet or current_fernet()), binding)


def rotate(token: str, binding: Binding) -> str:
    """Re-encrypt ``token`` with the newest key (``MultiFernet.rotate``), after checking it
    still opens for ``binding`` — a row that would not decrypt is reported, not rewritten."""
    fernet = current_fernet()
    unseal(token, binding, fernet=fernet)
    try:
        rotated = fernet.rotate(token.encode("ascii"))
    except InvalidToken:
        rotated = None
    if rotated is None:
        raise CredentialUnreadable(binding, REASON_NO_KEY)
    return rotated.decode("ascii")


def is_sealed_with_newest_key(token: str) -> bool:
    """True when the newest key alone decrypts ``token`` (rotation can skip such rows)."""
    try:
        Fernet(_keys()[0]).decrypt(token.encode("ascii"))
    except (InvalidToken, UnicodeEncodeError):
        return False
    return True
