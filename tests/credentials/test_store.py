"""``CredentialStore``: the async API tools use, scoped to one tenant per call."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import pytest
from cryptography.fernet import Fernet

from credentials.crypto import CredentialUnreadable
from credentials.models import Credential
from credentials.store import CredentialStore
from onevalet_site.errors import InvalidInput, NotFound, TooLarge
from tests.credentials.conftest import OTHER_SECRET, SECRET, assert_no_secret

# The store runs the ORM in a worker thread: rows must be committed for it to see them.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def store() -> CredentialStore:
    return CredentialStore()


@pytest.mark.smoke
async def test_save_get_list_delete(store: CredentialStore, user: Any) -> None:
    assert await store.get(user.pk, "google") is None
    await store.save(user.pk, "google", {"access_token": SECRET, "refresh_token": "r"})
    await store.save(str(user.pk), "google", {"api_key": "k"}, account_name="work")
    assert await store.get(user.pk, "google") == {"access_token": SECRET, "refresh_token": "r"}
    assert await store.get(str(user.pk), "google", "work") == {"api_key": "k"}

    listed = await store.list(user.pk)
    assert [(item["service"], item["account_name"], item["keys"]) for item in listed] == [
        ("google", "primary", ["access_token", "refresh_token"]),
        ("google", "work", ["api_key"]),
    ]
    assert set(listed[0]) == {"service", "account_name", "keys", "created_at", "updated_at"}
    assert isinstance(listed[0]["created_at"], datetime)
    assert_no_secret(repr(listed))

    assert await store.delete(user.pk, "google", "work") is True
    assert await store.delete(user.pk, "google", "work") is False
    assert await store.get(user.pk, "google", "work") is None


async def test_save_replaces_and_keeps_one_row(store: CredentialStore, user: Any) -> None:
    await store.save(user.pk, "google", {"access_token": "old"})
    first = await Credential.objects.aget(owner=user, service="google")
    await store.save(user.pk, "google", {"access_token": SECRET, "scope": "mail"})
    second = await Credential.objects.aget(owner=user, service="google")
    assert first.pk == second.pk and second.updated_at >= first.updated_at
    assert await store.get(user.pk, "google") == {"access_token": SECRET, "scope": "mail"}


async def test_list_filters_by_service(store: CredentialStore, user: Any) -> None:
    await store.save(user.pk, "google", {"a": "1"})
    await store.save(user.pk, "github", {"b": "2"})
    assert [item["service"] for item in await store.list(user.pk, service="github")] == ["github"]
    assert await store.list(user.pk, service="nothing") == []


@pytest.mark.smoke
async def test_tenants_are_isolated(store: CredentialStore, user: Any, other_user: Any) -> None:
    await store.save(user.pk, "google", {"access_token": SECRET})
    await store.save(other_user.pk, "google", {"access_token": OTHER_SECRET})
    await store.save(other_user.pk, "slack", {"token": OTHER_SECRET})

    assert await store.get(user.pk, "google") == {"access_token": SECRET}
    assert await store.get(user.pk, "slack") is None
    assert [item["service"] for item in await store.list(user.pk)] == ["google"]
    assert await store.delete(user.pk, "slack") is False
    assert await store.get(other_user.pk, "slack") == {"token": OTHER_SECRET}
    assert await store.delete(user.pk, "google") is True
    assert await store.get(other_user.pk, "google") == {"access_token": OTHER_SECRET}


async def test_get_of_an_unreadable_value_raises_but_list_still_works(
    store: CredentialStore, user: Any, settings: Any
) -> None:
    await store.save(user.pk, "google", {"access_token": SECRET})
    settings.CREDENTIALS_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(CredentialUnreadable, match="google/primary"):
        await store.get(user.pk, "google")
    assert [item["service"] for item in await store.list(user.pk)] == ["google"]
    await store.save(user.pk, "google", {"access_token": "fresh"})  # saving again repairs it
    assert await store.get(user.pk, "google") == {"access_token": "fresh"}


@pytest.mark.parametrize(
    ("service", "account", "value", "error"),
    [
        ("Google", "primary", {"a": "b"}, InvalidInput),
        ("go/ogle", "primary", {"a": "b"}, InvalidInput),
        ("", "primary", {"a": "b"}, InvalidInput),
        ("g" * 65, "primary", {"a": "b"}, InvalidInput),
        ("google", "work account", {"a": "b"}, InvalidInput),
        ("google", "primary", {}, InvalidInput),
        ("google", "primary", [SECRET], InvalidInput),
        ("google", "primary", {"a": {SECRET}}, InvalidInput),
        ("google", "primary", {"a": float("nan")}, InvalidInput),
        ("google", "primary", {"a": SECRET * 2000}, TooLarge),
    ],
)
async def test_invalid_input_is_refused_without_echoing_it(
    store: CredentialStore, user: Any, service: str, account: str, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error) as info:
        await store.save(user.pk, service, value, account_name=account)
    assert info.value.__context__ is None
    assert_no_secret(str(info.value) + repr(info.value.as_dict()), SECRET)
    assert await Credential.objects.acount() == 0


async def test_bad_or_unknown_tenant(store: CredentialStore, user: Any) -> None:
    with pytest.raises(InvalidInput, match="tenant_id"):
        await store.get("not-a-number", "google")
    with pytest.raises(NotFound):
        await store.save(user.pk + 1000, "google", {"a": "b"})


async def test_logs_and_repr_never_hold_the_secret(store: CredentialStore, user: Any, caplog: Any) -> None:
    with caplog.at_level(logging.DEBUG):
        await store.save(user.pk, "google", {"access_token": SECRET})
        await store.get(user.pk, "google")
        await store.list(user.pk)
        await store.delete(user.pk, "google")
    assert "service=google" in caplog.text
    assert_no_secret(caplog.text)
    assert repr(store) == "CredentialStore()"

