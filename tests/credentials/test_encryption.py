"""The sealed column: no plaintext in the database, binding to the row, clear failures."""

from __future__ import annotations

import logging
import pickle
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.db import connection

from credentials import crypto
from credentials.crypto import CredentialUnreadable
from credentials.models import Credential
from credentials.selectors import credential_value
from credentials.services import credential_save
from tests.credentials.conftest import SECRET, assert_no_secret

pytestmark = pytest.mark.django_db


def raw_row(pk: int) -> str:
    """The whole row as the database holds it, read with raw SQL past the ORM."""
    table = connection.ops.quote_name(Credential._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} WHERE id = %s", [pk])
        row = cursor.fetchone()
    assert row is not None
    return " ".join(str(column) for column in row)


@pytest.mark.smoke
def test_database_row_holds_no_plaintext(credential: Credential) -> None:
    assert connection.vendor in {"sqlite", "postgresql"}
    text = raw_row(credential.pk)
    assert_no_secret(text, SECRET)
    assert "access_token" in text  # key names are metadata, kept in clear on purpose
    assert credential.reveal() == {"access_token": SECRET, "expires_in": 3600}


def test_nested_values_are_sealed_too(user: Any) -> None:
    row, _ = credential_save(
        owner_id=user.pk, service="amadeus", credentials={"client": {"id": "abc", "secret": SECRET, "scopes": [SECRET]}}
    )
    assert_no_secret(raw_row(row.pk), SECRET)
    assert row.key_names == ["client"]


@pytest.mark.smoke
def test_round_trip_returns_the_same_dict(user: Any) -> None:
    value = {"token": SECRET, "n": 1, "ok": True, "nested": {"a": [1, 2]}, "nothing": None, "unicode": "héllo ✓"}
    credential_save(owner_id=user.pk, service="svc", account_name="work", credentials=value)
    assert credential_value(owner_id=user.pk, service="svc", account_name="work") == value


def test_wrong_key_gives_a_clear_error(credential: Credential, settings: Any) -> None:
    settings.CREDENTIALS_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(CredentialUnreadable) as info:
        credential_value(owner_id=credential.owner_id, service="google", account_name="primary")
    assert "google/primary" in str(info.value)
    assert info.value.reason == crypto.REASON_NO_KEY
    assert info.value.as_dict()["details"] == {"service": "google", "account_name": "primary"}


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda t: t[:-10], id="truncated"),
        pytest.param(lambda t: t[:40] + ("A" if t[40] != "A" else "B") + t[41:], id="tampered"),
        pytest.param(lambda t: "", id="emptied"),
        pytest.param(lambda t: "not a fernet token ✓", id="garbage"),
    ],
)
def test_damaged_token_gives_a_clear_error(credential: Credential, damage: Any) -> None:
    Credential.objects.filter(pk=credential.pk).update(sealed_value=damage(credential.sealed_value))
    with pytest.raises(CredentialUnreadable) as info:
        credential_value(owner_id=credential.owner_id, service="google", account_name="primary")
    assert "google/primary" in str(info.value)
    assert info.value.__context__ is None and info.value.__cause__ is None


@pytest.mark.smoke
def test_token_copied_into_another_users_row_does_not_open(credential: Credential, other_credential: Credential) -> None:
    Credential.objects.filter(pk=other_credential.pk).update(sealed_value=credential.sealed_value)
    with pytest.raises(CredentialUnreadable) as info:
        credential_value(owner_id=other_credential.owner_id, service="google", account_name="primary")
    assert info.value.reason == crypto.REASON_WRONG_ROW
    assert_no_secret(str(info.value) + repr(info.value) + str(info.value.as_dict()))
    # the original owner still reads their own value
    assert credential_value(owner_id=credential.owner_id, service="google", account_name="primary")["access_token"] == SECRET


def test_token_moved_to_another_service_or_account_does_not_open(user: Any, credential: Credential) -> None:
    for service, account in [("github", "primary"), ("google", "work")]:
        row, _ = credential_save(owner_id=user.pk, service=service, account_name=account, credentials={"x": "y"})
        Credential.objects.filter(pk=row.pk).update(sealed_value=credential.sealed_value)
        with pytest.raises(CredentialUnreadable, match=f"{service}/{account}"):
            credential_value(owner_id=user.pk, service=service, account_name=account)


def test_malformed_envelope_is_reported_without_content(user: Any, credential: Credential) -> None:
    token = crypto.current_fernet().encrypt(f'{{"token": "{SECRET}"'.encode()).decode()
    Credential.objects.filter(pk=credential.pk).update(sealed_value=token)
    with pytest.raises(CredentialUnreadable) as info:
        credential_value(owner_id=user.pk, service="google", account_name="primary")
    assert info.value.reason == crypto.REASON_MALFORMED
    assert info.value.__context__ is None
    assert_no_secret(str(info.value), SECRET)


def test_unreadable_value_is_logged_by_name_only(credential: Credential, settings: Any, caplog: Any) -> None:
    settings.CREDENTIALS_KEYS = [Fernet.generate_key().decode()]
    with caplog.at_level(logging.DEBUG), pytest.raises(CredentialUnreadable):
        credential_value(owner_id=credential.owner_id, service="google", account_name="primary")
    assert "service=google account=primary" in caplog.text
    assert_no_secret(caplog.text)
    assert credential.sealed_value[:30] not in caplog.text


def test_any_configured_key_decrypts_and_new_values_use_the_first(user: Any, old_key: str, new_key: str, settings: Any) -> None:
    old_row, _ = credential_save(owner_id=user.pk, service="old", credentials={"k": SECRET})
    settings.CREDENTIALS_KEYS = [new_key, old_key]
    assert credential_value(owner_id=user.pk, service="old", account_name="primary") == {"k": SECRET}
    new_row, _ = credential_save(owner_id=user.pk, service="new", credentials={"k": SECRET})
    Fernet(new_key).decrypt(new_row.sealed_value.encode())
    assert not crypto.is_sealed_with_newest_key(old_row.sealed_value)
    assert crypto.is_sealed_with_newest_key(new_row.sealed_value)


@pytest.mark.smoke
def test_repr_and_str_of_a_credential_hold_no_secret(credential: Credential) -> None:
    credential.reveal()
    text = repr(credential) + str(credential) + credential.masked + repr(credential.__dict__.get("key_names"))
    assert_no_secret(text)
    assert credential.sealed_value not in repr(credential)
    assert credential.masked == "•••••••• (access_token, expires_in)"


def test_unreadable_error_survives_pickling() -> None:
    error = CredentialUnreadable(crypto.Binding("1", "google", "work"), crypto.REASON_NO_KEY)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.binding, copy.reason, copy.status) == (str(error), error.binding, error.reason, 409)
