"""Events: API publish -> consumer -> only matching triggers fire; crashed consumers re-claimed."""

from __future__ import annotations

from typing import Any

import pytest

from notifications.models import Notification
from triggers import event_bus as event_bus_module
from triggers import services
from triggers.event_bus import EventConsumer
from triggers.models import TriggerRun

pytestmark = pytest.mark.django_db(transaction=True)


def event_task(owner: Any, name: str, event_filter: dict | None = None, source: str = "mail") -> Any:
    return services.trigger_task_create(owner_id=owner.pk, name=name, kind="event", event_source=source,
                                        event_type="email.received", event_filter=event_filter or {},
                                        executor="notify", action={"message": "Mail from {from}: {subject}"})


def test_api_event_fires_only_matching_tasks_of_the_caller(user: Any, other_user: Any, api_client: Any, bus: Any,
                                                          eager_celery: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_bus_module, "stream_name", lambda: bus.stream)
    amazon = event_task(user, "amazon", {"from": {"contains": "amazon"}})
    event_task(user, "bank", {"from": {"contains": "bank"}})
    event_task(user, "other source", source="calendar")
    theirs = event_task(other_user, "theirs")
    consumer = EventConsumer(bus=bus, name="c1")
    response = api_client.post("/api/v1/events", {"source": "mail", "type": "email.received",
                                                  "data": {"from": "orders@amazon.com", "subject": "Shipped"}},
                               format="json")
    assert response.status_code == 202, response.content
    assert consumer.run_once(block_ms=None) == 1
    assert list(TriggerRun.objects.values_list("task_id", "trigger_type")) == [(amazon.pk, "event")]
    assert Notification.objects.get(owner=user).body == "Mail from orders@amazon.com: Shipped"
    assert not TriggerRun.objects.filter(task=theirs).exists()
    assert bus.pending_count() == 0


@pytest.mark.parametrize("body", [
    {"source": "mail"},
    {"source": "mail", "type": "bad type!", "data": {}},
    {"source": "mail", "type": "x", "data": {"blob": "x" * 70_000}},
    {"source": "mail", "type": "x", "data": []},
])
def test_event_api_checks_schema_and_size(api_client: Any, body: dict) -> None:
    assert api_client.post("/api/v1/events", body, format="json").status_code == 400


def test_event_api_needs_authentication(client: Any) -> None:
    assert client.post("/api/v1/events", {"source": "a", "type": "b"}, content_type="application/json"
                       ).status_code in (401, 403)


def test_consumer_killed_before_ack_is_reclaimed_and_handled_once(user: Any, bus: Any, eager_celery: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    task = event_task(user, "any mail")
    bus.ensure_group()
    bus.publish("mail", "email.received", {"from": "a@b", "subject": "hi"}, owner_id=user.pk)
    # The first consumer reads the entry and handles it, then "dies" before XACK.
    crashed = EventConsumer(bus=bus, name="crashed", claim_idle_ms=0)
    monkeypatch.setattr(bus, "ack", lambda *ids: None)
    assert crashed.run_once(block_ms=None) == 1
    monkeypatch.undo()
    monkeypatch.setattr(event_bus_module, "stream_name", lambda: bus.stream)
    assert bus.pending_count() == 1
    # After restart another consumer re-claims the pending entry; the run key keeps it once.
    restarted = EventConsumer(bus=bus, name="restarted", claim_idle_ms=0)
    assert restarted.run_once(block_ms=None) == 1
    assert bus.pending_count() == 0
    assert TriggerRun.objects.filter(task=task).count() == 1
    assert Notification.objects.filter(owner=user).count() == 1
    assert restarted.run_once(block_ms=None) == 0
