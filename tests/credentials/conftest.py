"""Fixtures of the credentials tests: secrets easy to search for, keys, staff users, Redis.

The suite's ``user``, ``other_user`` and ``api_client`` come from ``tests/conftest.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Permission

from credentials.models import Credential
from credentials.services import credential_save
from tests.factories import make_user

# Distinctive values: if any of them (or a long piece of one) shows up in a page, a response,
# a log or a database column, a secret leaked.
SECRET = "sk-live-Zq8Vw3Pp9Lm2Xr7Tt4Ny"
OTHER_SECRET = "ya29.OtherUsersTokenGh5Kd8Jw1Qs"


def secret_pieces(secret: str, size: int = 8) -> list[str]:
    """Every ``size``-long substring of ``secret``: a partial leak counts as a leak."""
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets or (SECRET, OTHER_SECRET):
        leaked = [piece for piece in secret_pieces(secret) if piece in text]
        assert not leaked, f"secret material leaked: {leaked[:3]}"


@pytest.fixture
def new_key() -> str:
    return Fernet.generate_key().decode()


@pytest.fixture
def old_key(settings: Any) -> str:
    """A fresh key made the only configured one, so tests know what sealed their rows."""
    key = Fernet.generate_key().decode()
    settings.CREDENTIALS_KEYS = [key]
    return key


@pytest.fixture
def credential(user: Any) -> Credential:
    row, _ = credential_save(
        owner_id=user.pk, service="google", credentials={"access_token": SECRET, "expires_in": 3600}
    )
    return row


@pytest.fixture
def other_credential(other_user: Any) -> Credential:
    row, _ = credential_save(owner_id=other_user.pk, service="google", credentials={"access_token": OTHER_SECRET})
    return row


def grant_credential_perms(staff: Any) -> Any:
    perms = Permission.objects.filter(content_type__app_label="credentials", content_type__model="credential")
    staff.user_permissions.add(*perms)
    return staff


@pytest.fixture
def staff_user(db: None) -> Any:
    """Staff, not superuser, with every credential permission: still only their own rows."""
    return grant_credential_perms(make_user(is_staff=True))


@pytest.fixture
def superuser(db: None) -> Any:
    return make_user(is_staff=True, is_superuser=True)
