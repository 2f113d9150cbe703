"""Notifications: the service, the REST list (unread first), mark read, and the push."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction

from notifications import services
from notifications.selectors import notification_list
from orchestrator import event_store


@pytest.mark.smoke
@pytest.mark.django_db
def test_list_is_unread_first_and_owner_scoped(api_client: Any, user: Any, other_user: Any) -> None:
    first = services.notification_create(owner_id=user.pk, title="first", body="b")
    second = services.notification_create(owner_id=user.pk, title="second", body="b", source="trigger")
    services.notification_create(owner_id=other_user.pk, title="not yours", body="b")
    services.notification_mark_read(owner_id=user.pk, notification_id=second.pk)
    third = services.notification_create(owner_id=user.pk, title="third", body="b", link="/approvals/1/",
                                         source="approval", data={"approval": 1})

    body = api_client.get("/api/v1/notifications").json()
    assert body["count"] == 3
    assert [n["title"] for n in body["results"]] == ["third", "first", "second"]
    assert body["results"][0] == {**body["results"][0], "id": third.pk, "is_read": False, "link": "/approvals/1/",
                                  "source": "approval", "data": {"approval": 1}}
    assert body["results"][2]["is_read"] is True
    assert [n.pk for n in notification_list(owner_id=user.pk, unread_first=False)] == [third.pk, second.pk, first.pk]

    page = api_client.get("/api/v1/notifications?limit=1&offset=1").json()
    assert [n["title"] for n in page["results"]] == ["first"] and page["next"]


@pytest.mark.django_db
def test_mark_read_and_read_all(api_client: Any, user: Any, other_user: Any) -> None:
    mine = services.notification_create(owner_id=user.pk, title="mine", body="")
    services.notification_create(owner_id=user.pk, title="mine too", body="")
    theirs = services.notification_create(owner_id=other_user.pk, title="theirs", body="")

    response = api_client.post(f"/api/v1/notifications/{theirs.pk}/read")
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    response = api_client.post(f"/api/v1/notifications/{mine.pk}/read")
    assert response.status_code == 200 and response.json()["is_read"] is True
    again = api_client.post(f"/api/v1/notifications/{mine.pk}/read").json()
    assert again["read_at"] == response.json()["read_at"]  # idempotent: the first read time stays

    assert api_client.post("/api/v1/notifications/read-all").json() == {"marked": 1}
    theirs.refresh_from_db()
    assert theirs.read_at is None


@pytest.mark.django_db(transaction=True)
def test_push_is_sent_after_commit_only(user: Any) -> None:
    before = _sync(event_store.last_seq)(user.pk)
    with pytest.raises(RuntimeError), transaction.atomic():
        services.notification_create(owner_id=user.pk, title="rolled back", body="")
        raise RuntimeError("abort")
    assert _sync(event_store.read_since)(user.pk, before, 10) == []

    with transaction.atomic():
        created = services.notification_create(owner_id=user.pk, title="kept", body="hello")
        assert _sync(event_store.read_since)(user.pk, before, 10) == []
    events = _sync(event_store.read_since)(user.pk, before, 10)
    assert [(e["type"], e["id"], e["title"]) for _, e in events] == [("notification", created.pk, "kept")]


def _sync(fn: Any) -> Any:
    return async_to_sync(fn)
