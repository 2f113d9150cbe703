"""The chat websocket through the ASGI app (Channels' communicator): events, auth, frames."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from orchestrator.models import Message
from tests.llm_server import error, text, tool_calls

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.mark.smoke
async def test_tool_using_run_streams_events_in_order(connect: Any, token: str, orchestrator: Any,
                                                      llm_server: Any, settings: Any) -> None:
    answer = "It is sunny and 21 degrees in Paris today."
    # Deltas spaced wider than the coalescing window reach the socket one by one.
    llm_server.script(tool_calls(("get_weather", {"city": "Paris"})), text(answer, chunk_delay=0.03))
    settings.ONEVALET_CHUNK_WINDOW_MS = 10
    connected, subprotocol, ws = await connect(token=token)
    assert connected and subprotocol == "onevalet"

    await ws.send({"type": "message", "content": "Weather in Paris?", "ref": "r1"})
    accepted = await ws.receive()
    assert accepted["type"] == "accepted" and accepted["ref"] == "r1"
    events = await ws.until("execution_end")

    kinds = [e["type"] for e in events]
    chunks = [e for e in events if e["type"] == "message_chunk"]
    assert kinds == ["message_start", "message_end", "tool_call_start", "tool_result", "message_start",
                     *["message_chunk"] * len(chunks), "message_end", "execution_end"]
    assert len(chunks) > 1 and "".join(c["delta"] for c in chunks) == answer == events[-2]["content"]
    assert events[2]["name"] == "get_weather" and events[3]["success"] is True
    assert {e["conversation"] for e in events} == {accepted["conversation"]}
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs, key=lambda s: tuple(map(int, s.split("-")))) and len(set(seqs)) == len(seqs)
    assert events[-1]["summary"]["response"] == answer
    await ws.close()


@pytest.mark.smoke
async def test_unauthenticated_socket_is_closed_with_4401(connect: Any, user: Any) -> None:
    connected, _, ws = await connect(token=None)
    assert connected
    assert await ws.communicator.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    connected, _, ws = await connect(token="not-a-token")
    assert await ws.communicator.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}


async def test_cross_origin_socket_is_refused(connect: Any, token: str) -> None:
    connected, _, _ = await connect(token=token, origin=(b"origin", b"https://evil.example"))
    assert not connected
    connected, _, _ = await connect(token=token, origin=(b"origin", b"http://localhost"))
    assert connected


async def test_native_client_without_origin_authenticates_with_its_token(connect: Any, token: str) -> None:
    """Mobile websocket clients send no Origin header; browsers always do."""
    connected, _, ws = await connect(token=token, origin=None)
    assert connected
    await ws.send({"type": "ping"})
    assert (await ws.receive())["type"] == "pong"
    connected, _, ws = await connect(token=None, origin=None)
    assert await ws.communicator.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}


@pytest.mark.parametrize("frame, code", [
    ("not json", "not_json"),
    ("[1, 2]", "not_object"),
    ({"type": "dance"}, "unknown_type"),
    ({"content": "no type"}, "unknown_type"),
    ({"type": "message"}, "empty_message"),
    ({"type": "message", "content": "   "}, "empty_message"),
    ({"type": "message", "content": "hi", "conversation": 12}, "invalid_conversation"),
    ({"type": "resync", "after": "yesterday"}, "invalid_seq"),
    ("x" * (64 * 1024 + 1), "frame_too_large"),
])
async def test_malformed_frames_get_an_error_and_the_socket_stays_usable(connect: Any, token: str, frame: Any,
                                                                         code: str) -> None:
    _, _, ws = await connect(token=token)
    await ws.send(frame)
    reply = await ws.receive()
    assert reply["type"] == "error" and reply["code"] == code and reply["message"]
    await ws.send({"type": "ping"})
    assert await ws.receive() == {"type": "pong"}
    await ws.close()


async def test_unknown_or_foreign_conversation_is_not_found(connect: Any, token: str, other_user: Any) -> None:
    from orchestrator.services import conversation_create

    foreign = await sync_to_async(conversation_create)(owner_id=other_user.pk, title="theirs")
    _, _, ws = await connect(token=token)
    for conversation in (str(foreign.id), "00000000-0000-0000-0000-000000000000", "nonsense"):
        await ws.send({"type": "message", "content": "hi", "conversation": conversation})
        assert (await ws.receive())["code"] == "not_found"
    await ws.close()


async def test_llm_not_configured_is_an_error_event(connect: Any, token: str, orchestrator: Any,
                                                     llm_server: Any) -> None:
    llm_server.script(error(401, message="bad key"))
    _, _, ws = await connect(token=token)
    await ws.send({"type": "message", "content": "hello"})
    await ws.until("accepted")
    event = (await ws.until("error"))[-1]
    assert event["code"] == "llm_not_configured" and event["seq"] and event["conversation"]


async def test_run_survives_disconnect_and_resync_replays_it(connect: Any, token: str, orchestrator: Any,
                                                             llm_server: Any, user: Any) -> None:
    llm_server.script(text("one two three four five", latency=0.3))
    _, _, ws = await connect(token=token)
    await ws.send({"type": "message", "content": "count"})
    accepted = await ws.receive()
    await ws.send({"type": "ping"})
    assert (await ws.receive())["type"] == "pong"
    await ws.close()  # before the LLM has answered

    _, _, ws2 = await connect(token=token)
    live = await ws2.until("execution_end", timeout=10)  # the detached run finished without a socket
    await ws2.close()
    assert live[-1]["summary"]["response"] == "one two three four five"
    rows = await sync_to_async(lambda: list(Message.objects.filter(conversation_id=accepted["conversation"])
                                            .values_list("role", flat=True)))()
    assert rows == ["user", "assistant"]


async def test_a_client_that_acks_has_a_bounded_number_of_events_in_flight(connect: Any, token: str,
                                                                           orchestrator: Any, llm_server: Any,
                                                                           settings: Any) -> None:
    """Flow control: the server pauses at the limit and resumes on the next ack, losing nothing."""
    settings.ONEVALET_WS_MAX_UNACKED = 10
    settings.ONEVALET_CHUNK_WINDOW_MS = 0  # every delta is an event
    answer = " ".join(f"w{i}" for i in range(40))
    llm_server.script(text(answer))
    _, _, ws = await connect(token=token)
    await ws.send({"type": "ack", "seq": "0-0"})  # flow control on
    await ws.send({"type": "message", "content": "forty words please"})
    assert (await ws.receive())["type"] == "accepted"
    received = [await ws.receive() for _ in range(10)]
    assert await ws.communicator.receive_nothing(timeout=0.5)  # paused: 10 in flight, none acked
    events = list(received)
    while events[-1]["type"] != "execution_end":
        await ws.send({"type": "ack", "seq": events[-1]["seq"]})
        batch = [await ws.receive()]
        while len(batch) < 10 and batch[-1]["type"] != "execution_end":
            batch.append(await ws.receive())
        events += batch
    deltas = "".join(e["delta"] for e in events if e["type"] == "message_chunk")
    assert deltas == answer
    seqs = [e["seq"] for e in events]
    assert len(set(seqs)) == len(seqs)
