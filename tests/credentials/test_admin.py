"""The credentials admin: masked values, write-only replacement, per-owner visibility, audit."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.test import Client

from credentials.models import Credential
from credentials.selectors import credential_value
from tests.credentials.conftest import OTHER_SECRET, SECRET, assert_no_secret

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/credentials/credential/"


def change_url(credential: Credential) -> str:
    return f"{CHANGELIST}{credential.pk}/change/"


def page(client: Client, url: str, **params: Any) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.status_code
    html = response.content.decode()
    assert_no_secret(html)
    return html


@pytest.fixture
def admin_client_for(client: Client) -> Any:
    def login(user: Any) -> Client:
        client.force_login(user)
        return client

    return login


@pytest.mark.smoke
def test_superuser_sees_every_credential_masked(
    admin_client_for: Any, superuser: Any, credential: Credential, other_credential: Credential
) -> None:
    client = admin_client_for(superuser)
    html = page(client, CHANGELIST)
    assert html.count("•••••••• (access_token") == 2
    assert "expires_in" in html
    for row in (credential, other_credential):
        detail = page(client, change_url(row))
        assert 'name="new_value"' in detail and "access_token" in detail
        assert row.sealed_value[:20] not in detail


def test_search_by_owner_service_and_account(
    admin_client_for: Any, superuser: Any, credential: Credential, other_credential: Credential, user: Any
) -> None:
    client = admin_client_for(superuser)
    assert f"/{credential.pk}/change/" in page(client, CHANGELIST, q=user.username)
    assert f"/{other_credential.pk}/change/" not in page(client, CHANGELIST, q=user.username)
    assert page(client, CHANGELIST, q="google").count("/change/") >= 2
    assert f"/{credential.pk}/change/" not in page(client, CHANGELIST, q="nothing-like-this")


@pytest.mark.smoke
def test_staff_see_and_edit_only_their_own(
    admin_client_for: Any, staff_user: Any, other_credential: Credential, other_user: Any
) -> None:
    client = admin_client_for(staff_user)
    client.post(
        f"{CHANGELIST}add/",
        {"owner": staff_user.pk, "service": "github", "account_name": "primary", "new_value": json.dumps({"t": SECRET})},
    )
    own = Credential.objects.get(owner=staff_user)
    html = page(client, CHANGELIST)
    assert f"/{own.pk}/change/" in html and f"/{other_credential.pk}/change/" not in html
    assert "0 results" in page(client, CHANGELIST, q=other_user.username)
    page(client, change_url(own))

    for url in (change_url(other_credential), f"{CHANGELIST}{other_credential.pk}/delete/"):
        response = client.get(url, follow=True)  # the admin's "doesn't exist" redirect to its index
        assert response.redirect_chain == [("/admin/", 302)]
        assert "doesn’t exist" in response.content.decode()
        assert_no_secret(response.content.decode())
    client.post(change_url(other_credential), {"new_value": json.dumps({"access_token": "hijacked"})})
    client.post(f"{CHANGELIST}{other_credential.pk}/delete/", {"post": "yes"})
    assert credential_value(owner_id=other_user.pk, service="google", account_name="primary") == {
        "access_token": OTHER_SECRET
    }


def test_staff_cannot_create_a_credential_for_someone_else(admin_client_for: Any, staff_user: Any, other_user: Any) -> None:
    client = admin_client_for(staff_user)
    add_page = page(client, f"{CHANGELIST}add/")
    assert other_user.username not in add_page
    response = client.post(
        f"{CHANGELIST}add/",
        {"owner": other_user.pk, "service": "github", "account_name": "primary", "new_value": json.dumps({"t": SECRET})},
    )
    assert response.status_code == 200  # the form comes back with an error
    assert_no_secret(response.content.decode())
    assert not Credential.objects.exists()


@pytest.mark.smoke
def test_replacing_a_value_is_write_only_and_logged(
    admin_client_for: Any, superuser: Any, credential: Credential, user: Any, caplog: Any
) -> None:
    client = admin_client_for(superuser)
    new_value = {"access_token": OTHER_SECRET, "refresh_token": "r"}
    with caplog.at_level(logging.DEBUG):
        response = client.post(change_url(credential), {"new_value": json.dumps(new_value)})
    assert response.status_code == 302
    assert credential_value(owner_id=user.pk, service="google", account_name="primary") == new_value
    assert "replaced credential: owner=%s service=google account=primary" % user.pk in caplog.text
    entry = LogEntry.objects.get(object_id=str(credential.pk), action_flag=CHANGE)
    assert_no_secret(entry.change_message + entry.object_repr)
    assert_no_secret(caplog.text)
    html = page(client, change_url(credential))
    assert "refresh_token" in html
    assert_no_secret(page(client, f"{change_url(credential)[:-7]}history/"))


def test_empty_new_value_keeps_the_stored_one(admin_client_for: Any, superuser: Any, credential: Credential) -> None:
    client = admin_client_for(superuser)
    assert client.post(change_url(credential), {"new_value": ""}).status_code == 302
    assert credential_value(owner_id=credential.owner_id, service="google", account_name="primary")["access_token"] == SECRET


@pytest.mark.parametrize(
    "typed",
    [
        '{"access_token": "' + SECRET + '"',  # not JSON
        json.dumps([SECRET]),
        json.dumps({}),
        json.dumps({"access_token": SECRET * 1000}),
    ],
    ids=["broken-json", "list", "empty", "too-large"],
)
def test_a_refused_value_is_not_echoed_back(
    admin_client_for: Any, superuser: Any, credential: Credential, typed: str
) -> None:
    client = admin_client_for(superuser)
    response = client.post(change_url(credential), {"new_value": typed})
    assert response.status_code == 200
    html = response.content.decode()
    assert "errornote" in html or "errorlist" in html
    assert_no_secret(html)
    assert credential_value(owner_id=credential.owner_id, service="google", account_name="primary")["access_token"] == SECRET


def test_add_requires_a_value_and_unique_names(admin_client_for: Any, superuser: Any, credential: Credential, user: Any) -> None:
    client = admin_client_for(superuser)
    missing = client.post(f"{CHANGELIST}add/", {"owner": user.pk, "service": "slack", "account_name": "primary"})
    assert missing.status_code == 200 and "needs a value" in missing.content.decode()
    duplicate = client.post(
        f"{CHANGELIST}add/",
        {"owner": user.pk, "service": "google", "account_name": "primary", "new_value": json.dumps({"a": SECRET})},
    )
    assert duplicate.status_code == 200 and "already exists" in duplicate.content.decode()
    assert_no_secret(duplicate.content.decode())
    assert Credential.objects.count() == 1


def test_owner_service_and_account_are_fixed_after_creation(
    admin_client_for: Any, superuser: Any, credential: Credential, other_user: Any
) -> None:
    client = admin_client_for(superuser)
    client.post(change_url(credential), {"owner": other_user.pk, "service": "evil", "account_name": "x", "new_value": ""})
    credential.refresh_from_db()
    assert (credential.owner_id, credential.service, credential.account_name) != (other_user.pk, "evil", "x")
    assert credential.reveal()["access_token"] == SECRET


def test_delete_is_logged_without_the_secret(
    admin_client_for: Any, superuser: Any, credential: Credential, other_credential: Credential, caplog: Any
) -> None:
    client = admin_client_for(superuser)
    assert_no_secret(page(client, f"{CHANGELIST}{credential.pk}/delete/"))
    with caplog.at_level(logging.INFO):
        client.post(f"{CHANGELIST}{credential.pk}/delete/", {"post": "yes"})
        client.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [other_credential.pk], "post": "yes"})
    assert not Credential.objects.exists()
    assert caplog.text.count("deleted credential") == 2
    assert LogEntry.objects.filter(action_flag=DELETION).count() == 2
    assert_no_secret(caplog.text)
