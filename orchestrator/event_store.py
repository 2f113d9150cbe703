"""The per-user event stream: every event meant for a user is stored, then announced.

The channel layer delivers at most once and silently drops messages for a full channel,
so it cannot be the record of what a client has seen. Each event is appended to a Redis
Stream per user (``XADD`` with ``MAXLEN ~``, so memory stays bounded); the stream id Redis
assigns atomically is the event's sequence number (``seq``), monotonic per user. Only
then is a hint sent to the user's group ``user.<id>``: a socket that gets the hint reads
the stream from its own cursor, and a socket that reconnects reads from the last ``seq``
its client saw. A lost hint therefore delays an event until the next one; it never loses it.

Runs in daphne, runs in a Celery worker and notifications created in any process all use
:func:`publish` / :func:`publish_sync`, with the embedded Redis and a real one alike.
"""

from __future__ import annotations

import asyncio

import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from orchestrator.events import LoopEvent
from orchestrator.locks import redis_client

logger = logging.getLogger("onevalet.events")

# Enough for a long run (a 300-word streamed answer is ~310 events) plus reconnect slack;
# ``~`` lets Redis trim whole nodes, so the length may exceed this a little.
STREAM_MAXLEN = int(getattr(settings, "ONEVALET_EVENT_STREAM_MAXLEN", 2000))
# A user who has been away this long starts from a fresh stream (their data is in the DB).
STREAM_TTL_SECONDS = 7 * 24 * 3600
HINT_TYPE = "user.event"
SEQ_PATTERN = re.compile(r"^\d{1,20}-\d{1,20}$")

_sync_client: redis.Redis | None = None
_sync_lock = threading.Lock()


def stream_key(user_id: int) -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'onevalet')}:events:{int(user_id)}"


def group_name(user_id: int) -> str:
    """The channel-layer group of every open socket of the user."""
    return f"user.{int(user_id)}"


def parse_seq(value: Any) -> tuple[int, int]:
    """``"1700000000000-3"`` as a comparable tuple; ``"0"`` is before everything."""
    if value in ("0", 0):
        return (0, 0)
    if not isinstance(value, str) or not SEQ_PATTERN.match(value):
        raise ValueError(f"not an event sequence number: {value!r}")
    ms, n = value.split("-")
    return (int(ms), int(n))


def _encode(event: dict[str, Any]) -> dict[str, str]:
    return {"e": json.dumps(event, separators=(",", ":"), default=str)}


def _decode(entries: list[tuple[Any, dict[Any, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for seq, fields in entries:
        seq = seq.decode() if isinstance(seq, bytes) else seq
        raw = fields.get(b"e", fields.get("e"))
        out.append((seq, {**json.loads(raw), "seq": seq}))
    return out


def _hint(seq: str) -> dict[str, Any]:
    return {"type": HINT_TYPE, "seq": seq}


async def publish(user_id: int, event: dict[str, Any]) -> str:
    """Store ``event`` in the user's stream, announce it to their sockets; return its seq."""
    client = redis_client()
    key = stream_key(user_id)
    async with client.pipeline(transaction=False) as pipe:
        pipe.xadd(key, _encode(event), maxlen=STREAM_MAXLEN, approximate=True)
        pipe.expire(key, STREAM_TTL_SECONDS)
        seq_raw, _ = await pipe.execute()
    seq = seq_raw.decode() if isinstance(seq_raw, bytes) else seq_raw
    await get_channel_layer().group_send(group_name(user_id), _hint(seq))
    return seq


def _client() -> redis.Redis:
    global _sync_client
    with _sync_lock:
        if _sync_client is None:
            _sync_client = redis.Redis.from_url(settings.REDIS_URL)
        return _sync_client


def publish_sync(user_id: int, event: dict[str, Any]) -> str:
    """:func:`publish` for sync code: Celery tasks and ``transaction.on_commit`` callbacks."""
    key = stream_key(user_id)
    with _client().pipeline(transaction=False) as pipe:
        pipe.xadd(key, _encode(event), maxlen=STREAM_MAXLEN, approximate=True)
        pipe.expire(key, STREAM_TTL_SECONDS)
        seq_raw, _ = pipe.execute()
    seq = seq_raw.decode() if isinstance(seq_raw, bytes) else seq_raw
    async_to_sync(get_channel_layer().group_send)(group_name(user_id), _hint(seq))
    return seq


def _after(seq: str) -> str:
    """The smallest stream id strictly after ``seq``; XRANGE's exclusive ``(`` form needs
    Redis 6.2+, computing the id works on any server."""
    ms, n = parse_seq(seq)
    return f"{ms}-{n + 1}"


async def read_since(user_id: int, last_seq: str, limit: int = 500) -> list[tuple[str, dict[str, Any]]]:
    """Up to ``limit`` events after ``last_seq``, oldest first, each with its ``seq`` set."""
    entries = await redis_client().xrange(stream_key(user_id), min=_after(last_seq), max="+", count=limit)
    return _decode(entries)


async def last_seq(user_id: int) -> str:
    """The newest seq of the user's stream, ``"0"`` when it is empty."""
    entries = await redis_client().xrevrange(stream_key(user_id), max="+", min="-", count=1)
    return _decode(entries)[0][0] if entries else "0"


@dataclass(frozen=True, slots=True)
class StreamInfo:
    length: int
    first_seq: str | None


async def stream_info(user_id: int) -> StreamInfo:
    """How much is stored: tests check the bound, resync checks whether history was trimmed."""
    client = redis_client()
    key = stream_key(user_id)
    length = await client.xlen(key)
    first = await client.xrange(key, min="-", max="+", count=1)
    return StreamInfo(length=length, first_seq=_decode(first)[0][0] if first else None)


def sink_for(user_id: int, conversation_id: str) -> Callable[[LoopEvent], Awaitable[None]]:
    """An ``EventSink`` publishing a run's events, each tagged with its conversation.

    Token deltas are coalesced (see :class:`ChunkCoalescer`): each stored event costs a few
    Redis round trips per open socket, and a client redraws no faster than a frame anyway.
    A failed publish is logged, not raised: the run and its transcript matter more than the
    live view of it, and a client that missed events reloads the conversation.
    """

    async def publish_one(event: dict[str, Any]) -> None:
        try:
            await publish(user_id, {**event, "conversation": conversation_id})
        except Exception:
            logger.warning("could not publish %s for user %s", event.get("type"), user_id, exc_info=True)

    return ChunkCoalescer(publish_one, window=settings.ONEVALET_CHUNK_WINDOW_MS / 1000)


class ChunkCoalescer:
    """Joins consecutive ``message_chunk`` deltas published within ``window`` seconds.

    Order is kept: any other event first flushes the pending chunk, and one lock serialises
    publishing, so a timer flush can never overtake the event that follows it.
    """

    def __init__(self, publish_one: Callable[[dict[str, Any]], Awaitable[None]], window: float) -> None:
        self._publish = publish_one
        self._window = window
        self._pending: dict[str, Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()

    async def __call__(self, event: Any) -> None:
        payload = event.as_dict()
        async with self._lock:
            if payload["type"] == "message_chunk" and self._window > 0:
                pending = self._pending
                if pending is not None and (pending["run"], pending["turn"]) == (payload["run"], payload["turn"]):
                    pending["delta"] += payload["delta"]
                    return
                await self._flush_locked()
                self._pending = payload
                self._timer = asyncio.get_running_loop().call_later(self._window, self._flush_soon)
                return
            await self._flush_locked()
            await self._publish(payload)

    def _flush_soon(self) -> None:
        task = asyncio.ensure_future(self._flush())
        _flushes.add(task)
        task.add_done_callback(_flushes.discard)

    async def _flush(self) -> None:
        async with self._lock:
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, None
        if pending is not None:
            await self._publish(pending)


_flushes: set[asyncio.Future] = set()  # strong references to timer flushes in flight
