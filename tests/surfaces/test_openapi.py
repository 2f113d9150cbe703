"""The OpenAPI document: valid OpenAPI 3, docs rendered from local assets, and a bounded
schemathesis run against a real daphne that finds no server error."""

from __future__ import annotations

from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from drf_spectacular.validation import validate_schema
from schemathesis.checks import not_a_server_error


@pytest.mark.smoke
@pytest.mark.django_db
def test_schema_is_valid_openapi_3_and_lists_the_contract(api_client: Any) -> None:
    document = api_client.get("/api/v1/schema?format=json").json()
    validate_schema(document)  # JSON Schema of OpenAPI 3.0 (openapi-spec-validator is not installed here)
    for path in ("/api/v1/messages", "/api/v1/conversations", "/api/v1/conversations/{conversation_id}/messages",
                 "/api/v1/notifications", "/api/v1/notifications/{notification_id}/read",
                 "/api/v1/notifications/read-all"):
        assert path in document["paths"], path
    assert set(document["paths"]["/api/v1/messages"]["post"]["responses"]) >= {"200", "400", "404", "413", "503"}


@pytest.mark.django_db
def test_docs_page_uses_no_cdn(api_client: Any) -> None:
    page = api_client.get("/api/v1/docs").content.decode()
    assert "swagger-ui" in page and "cdn" not in page.lower() and "/static/drf_spectacular_sidecar/" in page


@pytest.fixture(scope="session")
def live_schema(live: Any) -> Any:
    schema = schemathesis.openapi.from_url(live.url + "/api/v1/schema?format=json")
    # Every operation of the API but sending a message, which calls the LLM (covered by the
    # REST tests against the scripted server).
    return schema.exclude(method="POST", path="/api/v1/messages")


def test_api_fuzz_finds_no_server_error(live_schema: Any, live: Any) -> None:
    """Each operation gets up to 25 generated cases (schemathesis' pytest plugin does not
    load under this pytest version, so hypothesis drives each operation's strategy)."""
    seed_notification(live)
    headers = {"Authorization": f"Token {live.tokens['alice']}"}
    operations = [result.ok() for result in live_schema.get_all_operations()]
    assert len(operations) >= 15  # conversations, notifications, approvals, credentials, triggers, events

    for operation in operations:
        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def fuzz(case: Any) -> None:
            case.call_and_validate(headers=headers, checks=[not_a_server_error])

        fuzz()


_seeded: set[str] = set()


def seed_notification(live: Any) -> None:
    """Give the fuzzer rows to find (a notification and a conversation), once per server."""
    if live.url in _seeded:
        return
    _seeded.add(live.url)
    live.manage("shell", "-c", "from notifications.services import notification_create as c; "
                "c(owner_id=1, title='seed', body='for the fuzzer')")
    requests.get(live.url + "/api/v1/notifications", headers={"Authorization": f"Token {live.tokens['alice']}"},
                 timeout=10).raise_for_status()
