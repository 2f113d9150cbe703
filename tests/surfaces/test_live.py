"""Against a real daphne process, with the ``websockets`` client library and plain HTTP:
token and session authentication, a slow reader that resyncs, and run ordering."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
import requests
from websockets.asyncio.client import ClientConnection, connect

from tests.llm_server import RecordedRequest, Step, text, tool_calls


def _ws(live: Any, user: str = "alice", **kwargs: Any) -> Any:
    return connect(live.ws_url, origin=live.url, subprotocols=["onevalet", f"token.{live.tokens[user]}"],
                   open_timeout=5, **kwargs)


async def _until(ws: ClientConnection, kind: str, timeout: float = 15) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while not events or events[-1]["type"] != kind:
            events.append(json.loads(await ws.recv()))
    return events


def _seq(seq: str) -> tuple[int, int]:
    ms, n = seq.split("-")
    return int(ms), int(n)


def _rest(live: Any, method: str, path: str, user: str = "alice", **kwargs: Any) -> requests.Response:
    headers = {"Authorization": f"Token {live.tokens[user]}"}
    return requests.request(method, live.url + path, headers=headers, timeout=30, **kwargs)


@pytest.mark.smoke
async def test_token_subprotocol_over_real_daphne(live: Any, llm_server: Any) -> None:
    llm_server.script(tool_calls(("get_weather", {"city": "Oslo"})), text("Sunny in Oslo."))
    async with _ws(live) as ws:
        assert ws.subprotocol == "onevalet"
        await ws.send(json.dumps({"type": "message", "content": "Weather in Oslo?"}))
        events = await _until(ws, "execution_end")
    kinds = [e["type"] for e in events]
    assert kinds[0] == "accepted" and kinds[-1] == "execution_end"
    assert kinds.index("tool_call_start") < kinds.index("tool_result") < kinds.index("message_chunk")
    assert events[-1]["summary"]["response"] == "Sunny in Oslo."


async def test_session_cookie_login_and_cross_origin_refusal(live: Any, llm_server: Any) -> None:
    session = requests.Session()
    page = session.get(live.url + "/accounts/login/", timeout=10)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    done = session.post(live.url + "/accounts/login/", timeout=10, headers={"Referer": live.url + "/accounts/login/"},
                        data={"username": "bob", "password": "pw-bob", "csrfmiddlewaretoken": csrf})
    assert done.url.endswith("/chat/")
    cookie = "; ".join(f"{k}={v}" for k, v in session.cookies.items())
    async with connect(live.ws_url, origin=live.url, additional_headers={"Cookie": cookie}) as ws:
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await ws.recv()) == {"type": "pong"}
    with pytest.raises(Exception) as refused:
        async with connect(live.ws_url, origin="http://evil.example", additional_headers={"Cookie": cookie}):
            pass
    assert "403" in str(refused.value)
    async with connect(live.ws_url, origin=live.url) as anonymous:  # no cookie, no token
        with pytest.raises(Exception):
            await anonymous.recv()
        assert anonymous.close_code == 4401


async def test_stalled_reader_resyncs_without_gaps(live: Any, llm_server: Any) -> None:
    """A client stops reading mid-run (300 streamed words), reconnects and resyncs."""
    answer = " ".join(f"word{i}" for i in range(300))
    llm_server.script(text(answer, chunk_delay=0.001))
    async with _ws(live) as observer, _ws(live, max_queue=1, close_timeout=0.1) as stalled:
        await stalled.send(json.dumps({"type": "message", "content": "Say 300 words"}))
        seen = await _until(stalled, "message_chunk")  # ... and then it stops reading
        everything = await _until(observer, "execution_end", timeout=30)  # the run goes on
        last_seen = [e for e in seen if "seq" in e][-1]["seq"]
        stalled.transport.abort()  # the network drops: no close handshake
    async with _ws(live) as again:
        await again.send(json.dumps({"type": "resync", "after": last_seen}))
        replay = await _until(again, "resynced")
    replay_events, resynced = replay[:-1], replay[-1]
    expected = [e for e in everything if _seq(e["seq"]) > _seq(last_seen)]
    assert [e["seq"] for e in replay_events] == [e["seq"] for e in expected]
    assert resynced["complete"] is True and resynced["seq"] == everything[-1]["seq"]
    chunks = [e["delta"] for e in [*seen, *replay_events] if e["type"] == "message_chunk"]
    assert "".join(chunks) == answer
    assert len([e for e in everything if e["type"] == "message_chunk"]) >= 300


def _echo(latency: float) -> Any:
    def step(request: RecordedRequest) -> Step:
        return text(f"reply to: {request.last_message['content']}", latency=latency)

    return step


async def test_one_conversation_runs_in_order_two_run_in_parallel(live: Any, llm_server: Any) -> None:
    llm_server.script(text("ready"))
    conversation = _rest(live, "POST", "/api/v1/messages", json={"content": "start"}).json()["conversation"]
    llm_server.reset()
    llm_server.script(*[_echo(0.2)] * 5)
    async with _ws(live) as ws:
        rest_calls = [asyncio.to_thread(_rest, live, "POST", "/api/v1/messages",
                                        json={"content": f"rest {i}", "conversation": conversation})
                      for i in range(2)]
        for i in range(3):
            await ws.send(json.dumps({"type": "message", "content": f"ws {i}", "conversation": conversation}))
        responses = await asyncio.gather(*rest_calls)
        ends = 0
        async with asyncio.timeout(20):
            while ends < 5:  # the two REST runs publish to the stream as well
                ends += json.loads(await ws.recv())["type"] == "execution_end"
    assert [r.status_code for r in responses] == [200, 200]
    rows = _rest(live, "GET", f"/api/v1/conversations/{conversation}/messages").json()["results"]
    pairs = [(rows[i]["role"], rows[i + 1]["role"]) for i in range(2, len(rows), 2)]
    assert pairs == [("user", "assistant")] * 5
    assert all(rows[i + 1]["content"] == f"reply to: {rows[i]['content']}" for i in range(2, len(rows), 2))
    starts = sorted(r.received_at for r in llm_server.requests)
    assert all(b - a >= 0.2 for a, b in zip(starts, starts[1:])), "runs of one conversation overlapped"

    llm_server.reset()
    llm_server.script(_echo(0.6), _echo(0.6))
    both = await asyncio.gather(*[asyncio.to_thread(_rest, live, "POST", "/api/v1/messages",
                                                    json={"content": f"parallel {i}"}) for i in range(2)])
    assert len({r.json()["conversation"] for r in both}) == 2
    first, second = sorted(r.received_at for r in llm_server.requests)
    assert second - first < 0.6, "two conversations of one user did not run in parallel"
