"""The event bus: one Redis Stream, one consumer group, at-least-once handling made once.

``publish`` appends an event (``XADD``). ``run_event_consumer`` reads new entries with
``XREADGROUP``, queues ``fire_trigger`` for every event trigger that matches (source, type
and the declarative filter), and only then ``XACK``s. A consumer that dies between reading
and acknowledging leaves its entries pending; any consumer re-claims them after
``claim_idle_ms`` (``XAUTOCLAIM``) and handles them again. Handling twice is harmless: the
run key of an event firing is ``event:<stream id>``, unique per task, so each matching
task still runs once.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

import redis
from django.conf import settings

from triggers.filters import matches
from triggers.firing import FireRequest, enqueue_fire
from triggers.selectors import event_tasks_matching

logger = logging.getLogger("onevalet.triggers.events")

GROUP = "triggers"
MAX_STREAM_LENGTH = 100_000


def stream_name() -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'onevalet')}:events"


@dataclass(slots=True)
class Event:
    id: str
    source: str
    type: str
    data: dict[str, Any]
    owner_id: int | None = None
    published_at: datetime = field(default_factory=lambda: datetime.now(dt_timezone.utc))

    @classmethod
    def from_entry(cls, entry_id: bytes | str, fields: dict[bytes, bytes]) -> Event:
        text = {k.decode(): v.decode() for k, v in fields.items()}
        entry = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        millis = int(entry.split("-", 1)[0])
        owner = text.get("owner") or None
        return cls(id=entry, source=text.get("source", ""), type=text.get("type", ""),
                   data=json.loads(text.get("data") or "{}"), owner_id=int(owner) if owner else None,
                   published_at=datetime.fromtimestamp(millis / 1000, dt_timezone.utc))


class EventBus:
    """Redis Streams, used directly: publish, read as a group member, acknowledge."""

    def __init__(self, client: redis.Redis | None = None, stream: str | None = None, group: str = GROUP) -> None:
        self.client = client or redis.Redis.from_url(settings.REDIS_URL)
        self.stream = stream or stream_name()
        self.group = group

    def publish(self, source: str, type: str, data: dict[str, Any], *, owner_id: int | None = None) -> str:
        """Append an event; an ``owner_id`` limits it to that user's triggers."""
        fields = {"source": source, "type": type, "data": json.dumps(data, ensure_ascii=False),
                  "owner": "" if owner_id is None else str(owner_id)}
        entry = self.client.xadd(self.stream, fields, maxlen=MAX_STREAM_LENGTH, approximate=True)
        return entry.decode() if isinstance(entry, bytes) else entry

    def ensure_group(self) -> None:
        """Create the group at the stream's start (id 0): events published before the first
        consumer ever ran are still handled."""
        try:
            self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def claim_stale(self, consumer: str, *, idle_ms: int, count: int = 100) -> list[Event]:
        """Take over entries another consumer read but never acknowledged (it crashed)."""
        result = self.client.xautoclaim(self.stream, self.group, consumer, min_idle_time=idle_ms,
                                        start_id="0-0", count=count)
        return [Event.from_entry(entry_id, fields) for entry_id, fields in result[1] if fields]

    def read(self, consumer: str, *, count: int = 100, block_ms: int | None = 1000) -> list[Event]:
        response = self.client.xreadgroup(self.group, consumer, {self.stream: ">"}, count=count, block=block_ms)
        return [Event.from_entry(entry_id, fields) for _, entries in response or [] for entry_id, fields in entries
                if fields]

    def ack(self, *event_ids: str) -> None:
        if event_ids:
            self.client.xack(self.stream, self.group, *event_ids)

    def pending_count(self) -> int:
        return int(self.client.xpending(self.stream, self.group)["pending"])


def handle_event(event: Event) -> list[int]:
    """Queue a firing for every matching event trigger; returns their task ids."""
    fired = []
    for task in event_tasks_matching(source=event.source, event_type=event.type, owner_id=event.owner_id):
        if not matches(task.event_filter, event.data):
            continue
        enqueue_fire(FireRequest(task_id=task.pk, run_key=f"event:{event.id}", scheduled_for=event.published_at,
                                 trigger_type="event",
                                 payload={"id": event.id, "source": event.source, "type": event.type,
                                          "data": event.data}))
        fired.append(task.pk)
    return fired


class EventConsumer:
    """One member of the group; ``run_once`` is one batch, so tests can drive it step by step."""

    def __init__(self, bus: EventBus | None = None, name: str | None = None, *, claim_idle_ms: int = 60_000,
                 batch: int = 100) -> None:
        self.bus = bus or EventBus()
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.claim_idle_ms = claim_idle_ms
        self.batch = batch
        self.bus.ensure_group()

    def run_once(self, *, block_ms: int | None = 1000) -> int:
        """Re-claim stale entries, read new ones, handle and acknowledge each; return how many."""
        events = self.bus.claim_stale(self.name, idle_ms=self.claim_idle_ms, count=self.batch)
        if not events:
            events = self.bus.read(self.name, count=self.batch, block_ms=block_ms)
        for event in events:
            try:
                handle_event(event)
            except Exception:
                # Left pending: re-claimed after the idle time and tried again.
                logger.exception("event %s (%s/%s) could not be handled", event.id, event.source, event.type)
                continue
            self.bus.ack(event.id)
        return len(events)
