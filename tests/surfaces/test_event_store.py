"""The per-user event stream: bounded, ordered, and the base of resync."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator import event_store


@pytest.mark.smoke
async def test_stream_is_bounded_and_ordered(redis_server: str) -> None:
    user_id = 900_001
    client = event_store.redis_client()
    await client.delete(event_store.stream_key(user_id))
    first = await event_store.publish(user_id, {"type": "test", "n": 0})
    for n in range(1, event_store.STREAM_MAXLEN + 500):
        seq = await event_store.publish(user_id, {"type": "test", "n": n})
    info = await event_store.stream_info(user_id)
    # MAXLEN ~ trims whole macro-nodes (100 entries by default): never far above the bound.
    assert event_store.STREAM_MAXLEN <= info.length <= event_store.STREAM_MAXLEN + 100
    assert event_store.parse_seq(info.first_seq) > event_store.parse_seq(first)
    assert await event_store.last_seq(user_id) == seq
    tail = await event_store.read_since(user_id, "0", 10)
    assert [e["seq"] for _, e in tail] == [s for s, _ in tail] and tail[0][0] == info.first_seq
    ns = [e["n"] for _, e in await event_store.read_since(user_id, tail[-1][0], 5000)]
    assert ns == list(range(tail[-1][1]["n"] + 1, event_store.STREAM_MAXLEN + 500))
    await client.delete(event_store.stream_key(user_id))


@pytest.mark.django_db(transaction=True)
async def test_resync_past_the_trimmed_history_says_incomplete(connect: Any, token: str, user: Any) -> None:
    for n in range(event_store.STREAM_MAXLEN + 200):
        await event_store.publish(user.pk, {"type": "test", "n": n})
    _, _, ws = await connect(token=token)
    await ws.send({"type": "resync", "after": "1-0"})
    events = await ws.until("resynced", timeout=30)
    assert events[-1]["complete"] is False and len(events) - 1 >= event_store.STREAM_MAXLEN
    await ws.close()


def test_publish_sync_reaches_the_stream(redis_server: str) -> None:
    from asgiref.sync import async_to_sync

    seq = event_store.publish_sync(900_002, {"type": "notification", "title": "from a worker"})
    events = async_to_sync(event_store.read_since)(900_002, "0", 100)
    assert events[-1] == (seq, {"type": "notification", "title": "from a worker", "seq": seq})


async def test_chunk_coalescer_joins_deltas_and_keeps_order() -> None:
    """Deltas within the window become one event; any other event flushes them first."""
    from orchestrator.event_store import ChunkCoalescer
    from orchestrator.events import MessageChunk, MessageEnd

    published: list[dict] = []

    async def publish(event: dict) -> None:
        published.append(event)

    sink = ChunkCoalescer(publish, window=60)  # the window never elapses in this test
    for word in ["It ", "is ", "sunny."]:
        await sink(MessageChunk(run="r", turn=1, delta=word))
    assert published == []  # still pending
    await sink(MessageChunk(run="r", turn=2, delta="Next turn."))  # another turn: flush the first
    await sink(MessageEnd(run="r", turn=2, content="Next turn.", input_tokens=1, output_tokens=1))
    assert [(e["type"], e.get("delta")) for e in published] == [
        ("message_chunk", "It is sunny."), ("message_chunk", "Next turn."), ("message_end", None)]


async def test_chunk_coalescer_flushes_when_the_window_elapses() -> None:
    import asyncio

    from orchestrator.event_store import ChunkCoalescer
    from orchestrator.events import MessageChunk

    flushed = asyncio.Event()
    published: list[dict] = []

    async def publish(event: dict) -> None:
        published.append(event)
        flushed.set()

    sink = ChunkCoalescer(publish, window=0.01)
    await sink(MessageChunk(run="r", turn=1, delta="a"))
    await sink(MessageChunk(run="r", turn=1, delta="b"))
    await asyncio.wait_for(flushed.wait(), timeout=5)
    assert published == [{"type": "message_chunk", "run": "r", "turn": 1, "delta": "ab"}]
