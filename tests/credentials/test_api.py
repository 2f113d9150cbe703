"""REST: ``/api/v1/credentials`` for the mobile app; values are write-only, rows owner-scoped."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from cryptography.fernet import Fernet
from rest_framework.test import APIClient

from credentials.models import Credential
from credentials.selectors import credential_value
from tests.credentials.conftest import OTHER_SECRET, SECRET, assert_no_secret

pytestmark = pytest.mark.django_db

URL = "/api/v1/credentials"


def body(response: Any) -> Any:
    text = response.content.decode()
    assert_no_secret(text)
    return json.loads(text) if text else None


@pytest.mark.smoke
def test_create_replace_list_delete(api_client: APIClient, user: Any) -> None:
    created = api_client.post(URL, {"service": "google", "credentials": {"access_token": SECRET}}, format="json")
    assert created.status_code == 201
    data = body(created)
    assert set(data) == {"service", "account_name", "keys", "created_at", "updated_at"}
    assert (data["service"], data["account_name"], data["keys"]) == ("google", "primary", ["access_token"])

    replaced = api_client.post(
        URL, {"service": "google", "account_name": "primary", "credentials": {"api_key": SECRET}}, format="json"
    )
    assert replaced.status_code == 200 and body(replaced)["keys"] == ["api_key"]
    assert credential_value(owner_id=user.pk, service="google", account_name="primary") == {"api_key": SECRET}

    api_client.post(URL, {"service": "github", "account_name": "work", "credentials": {"t": SECRET}}, format="json")
    listed = body(api_client.get(URL))
    assert listed["count"] == 2
    assert [(r["service"], r["account_name"]) for r in listed["results"]] == [("github", "work"), ("google", "primary")]

    assert api_client.delete(f"{URL}/github/work").status_code == 204
    missing = api_client.delete(f"{URL}/github/work")
    assert missing.status_code == 404 and body(missing)["code"] == "not_found"


@pytest.mark.smoke
def test_another_users_credentials_are_invisible(
    api_client: APIClient, credential: Credential, other_credential: Credential, other_user: Any
) -> None:
    Credential.objects.create(owner=other_user, service="slack", sealed_value="x", key_names=["token"])
    listed = body(api_client.get(URL))
    assert [(r["service"], r["account_name"]) for r in listed["results"]] == [("google", "primary")]
    assert api_client.delete(f"{URL}/slack/primary").status_code == 404
    assert Credential.objects.filter(owner=other_user, service="slack").exists()
    # a POST under the same names writes the caller's own row, never the other user's
    api_client.post(URL, {"service": "google", "credentials": {"access_token": "mine"}}, format="json")
    assert credential_value(owner_id=other_user.pk, service="google", account_name="primary") == {
        "access_token": OTHER_SECRET
    }


def test_list_works_when_a_value_cannot_be_decrypted(api_client: APIClient, credential: Credential, settings: Any) -> None:
    settings.CREDENTIALS_KEYS = [Fernet.generate_key().decode()]
    response = api_client.get(URL)
    assert response.status_code == 200 and body(response)["results"][0]["keys"] == ["access_token", "expires_in"]
    assert api_client.delete(f"{URL}/google/primary").status_code == 204


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"service": "Google", "credentials": {"a": SECRET}}, 400),
        ({"service": "goo gle", "credentials": {"a": SECRET}}, 400),
        ({"service": "google", "account_name": "../x", "credentials": {"a": SECRET}}, 400),
        ({"service": "g" * 65, "credentials": {"a": SECRET}}, 400),
        ({"service": "google", "credentials": {}}, 400),
        ({"service": "google", "credentials": SECRET}, 400),
        ({"service": "google", "credentials": [SECRET]}, 400),
        ({"service": "google"}, 400),
        ({"credentials": {"a": SECRET}}, 400),
        ({"service": "google", "credentials": {"a": SECRET * 1000}}, 413),
    ],
)
def test_invalid_input_is_refused_without_echoing_the_secret(
    api_client: APIClient, payload: dict[str, Any], status: int
) -> None:
    response = api_client.post(URL, payload, format="json")
    assert response.status_code == status
    assert body(response)["code"] in {"invalid", "too_large"}
    assert not Credential.objects.exists()


def test_form_encoded_bodies_are_refused(api_client: APIClient) -> None:
    response = api_client.post(URL, {"service": "google", "credentials": SECRET})
    assert response.status_code == 415
    body(response)


def test_anonymous_requests_are_refused(db: None) -> None:
    client = APIClient()
    assert client.get(URL).status_code in {401, 403}
    assert client.post(URL, {"service": "g", "credentials": {"a": "b"}}, format="json").status_code in {401, 403}
    assert client.delete(f"{URL}/g/primary").status_code in {401, 403}


def test_logs_never_hold_the_secret(api_client: APIClient, caplog: Any) -> None:
    with caplog.at_level(logging.DEBUG):
        api_client.post(URL, {"service": "google", "credentials": {"access_token": SECRET}}, format="json")
        api_client.post(URL, {"service": "Bad", "credentials": {"access_token": SECRET}}, format="json")
        api_client.get(URL)
        api_client.delete(f"{URL}/google/primary")
    assert "service=google" in caplog.text
    assert_no_secret(caplog.text)


def test_openapi_schema_describes_the_endpoints(api_client: APIClient) -> None:
    schema = api_client.get("/api/v1/schema", {"format": "json"}).json()
    post = schema["paths"]["/api/v1/credentials"]["post"]
    assert set(post["requestBody"]["content"]) == {"application/json"}
    assert set(post["responses"]) >= {"200", "201", "400"}
    request_schema = schema["components"]["schemas"]["CredentialInputRequest"]
    assert request_schema["properties"]["credentials"]["writeOnly"] is True
    assert request_schema["properties"]["service"]["pattern"]
    output = schema["components"]["schemas"]["CredentialOutput"]["properties"]
    assert "credentials" not in output and "keys" in output
    assert "PaginatedCredentialOutputList" in json.dumps(schema["paths"]["/api/v1/credentials"]["get"])
    delete = schema["paths"]["/api/v1/credentials/{service}/{account_name}"]["delete"]
    assert set(delete["responses"]) >= {"204", "404"}
