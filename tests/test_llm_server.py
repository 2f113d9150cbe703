"""The scripted LLM server, exercised through the real ``openai`` SDK.

These tests pin the server's wire format to what the SDK parses, so product tests built on it
fail for product reasons, not for a fake that drifted from OpenAI.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from tests.llm_server import (
    NO_SCRIPT_LEFT,
    RecordedRequest,
    ScriptedLLMServer,
    context_overflow,
    disconnect,
    error,
    hang,
    text,
    tool_calls,
)

MESSAGES: list[Any] = [{"role": "user", "content": "hello there"}]
TOOLS: list[Any] = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]


@pytest.fixture
async def client(llm_server: ScriptedLLMServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=llm_server.base_url, api_key="x", max_retries=0) as c:
        yield c


async def _stream(client: openai.AsyncOpenAI, **kwargs: Any) -> tuple[str, dict[int, dict[str, str]], list[Any]]:
    """Accumulate a stream the way the product must: content deltas and tool-call deltas by index."""
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                                  stream_options={"include_usage": True}, **kwargs)
    content, calls, chunks = "", {}, []
    async for chunk in stream:
        chunks.append(chunk)
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += tc.id or ""
                slot["name"] += (tc.function and tc.function.name) or ""
                slot["arguments"] += (tc.function and tc.function.arguments) or ""
    return content, calls, chunks


async def test_non_streaming_text(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    llm_server.script(text("Hello, world!", usage=(12, 3)))
    resp = await client.chat.completions.create(model="gpt-x", messages=MESSAGES, tools=TOOLS)
    assert resp.choices[0].message.content == "Hello, world!"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.model == "gpt-x"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.total_tokens) == (12, 3, 15)
    [req] = llm_server.requests
    assert req.messages == MESSAGES and req.tools == TOOLS and not req.stream
    assert req.headers["authorization"] == "Bearer x"


async def test_streaming_text_is_chunked(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    content = "The quick  brown fox\njumps over the lazy dog."
    llm_server.script(text(content))
    joined, calls, chunks = await _stream(client)
    assert joined == content and calls == {}
    assert chunks[0].choices[0].delta.role == "assistant"
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 5
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0  # default usage estimate


async def test_streaming_tool_calls_accumulate(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    args = {"tz": "Europe/Berlin", "format": "iso"}
    llm_server.script(tool_calls(("get_time", args), ("my-id", "search", '{"q": "x'), content="Let me check."))
    content, calls, chunks = await _stream(client, tools=TOOLS)
    assert content == "Let me check."
    assert calls[0] == {"id": "call_1", "name": "get_time", "arguments": json.dumps(args)}
    assert calls[1] == {"id": "my-id", "name": "search", "arguments": '{"q": "x'}  # raw, invalid JSON kept
    arg_pieces = [c for c in chunks if c.choices and c.choices[0].delta.tool_calls
                  and c.choices[0].delta.tool_calls[0].index == 0 and c.choices[0].delta.tool_calls[0].id is None]
    assert len(arg_pieces) >= 2
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None


async def test_non_streaming_tool_calls_and_ids(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    llm_server.script(tool_calls(("a", {})), tool_calls(("b", {"x": 1})))
    first = await client.chat.completions.create(model="m", messages=MESSAGES)
    second = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.choices[0].message.tool_calls[0].id == "call_1"
    assert second.choices[0].message.tool_calls[0].id == "call_2"
    assert second.choices[0].message.tool_calls[0].function.arguments == '{"x": 1}'
    assert second.usage.prompt_tokens > 0


async def test_callable_step_sees_the_request(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    def echo(request: RecordedRequest) -> Any:
        return text(f"tool said: {request.last_message['content']}")

    llm_server.script(echo)
    messages = [*MESSAGES, {"role": "tool", "tool_call_id": "call_1", "content": "12:00"}]
    resp = await client.chat.completions.create(model="m", messages=messages)
    assert resp.choices[0].message.content == "tool said: 12:00"


async def test_rate_limit_with_retry_after(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    llm_server.script(error(429, message="slow down", retry_after=7))
    with pytest.raises(openai.RateLimitError) as exc_info:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert exc_info.value.response.headers["retry-after"] == "7"
    assert exc_info.value.body["message"] == "slow down"


@pytest.mark.parametrize(("step", "exc_type"), [
    (error(401, code="invalid_api_key"), openai.AuthenticationError),
    (error(500), openai.InternalServerError),
    (error(503), openai.InternalServerError),
])
async def test_error_statuses(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI,
                              step: Any, exc_type: type[Exception]) -> None:
    llm_server.script(step)
    with pytest.raises(exc_type):
        await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)


async def test_context_overflow(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    llm_server.script(context_overflow())
    with pytest.raises(openai.BadRequestError) as exc_info:
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert exc_info.value.code == "context_length_exceeded"
    assert exc_info.value.type == "invalid_request_error"


async def test_latency_runs_concurrently(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    llm_server.script(*(text(f"r{i}", latency=0.3) for i in range(5)))
    start = time.monotonic()
    results = await asyncio.gather(*(client.chat.completions.create(model="m", messages=MESSAGES)
                                     for _ in range(5)))
    assert sorted(r.choices[0].message.content for r in results) == [f"r{i}" for i in range(5)]
    assert 0.3 <= time.monotonic() - start < 1.2


async def test_hang_times_out_and_disconnect_fails(llm_server: ScriptedLLMServer,
                                                   client: openai.AsyncOpenAI) -> None:
    llm_server.script(hang(), disconnect(), text("still alive"))
    with pytest.raises(openai.APITimeoutError):
        await client.chat.completions.create(model="m", messages=MESSAGES, timeout=0.3)
    with pytest.raises(openai.APIConnectionError):
        await client.chat.completions.create(model="m", messages=MESSAGES)
    resp = await client.chat.completions.create(model="m", messages=MESSAGES)
    assert resp.choices[0].message.content == "still alive"


async def test_models_endpoint(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    models = await client.models.list()
    assert [m.id for m in models.data] == ["scripted-model"]
    assert llm_server.requests == []  # /models consumes no step


@pytest.mark.llm_unexpected_ok
async def test_unscripted_request_is_500_and_recorded(llm_server: ScriptedLLMServer,
                                                      client: openai.AsyncOpenAI) -> None:
    llm_server.script(text("only one"))
    await client.chat.completions.create(model="m", messages=MESSAGES)
    with pytest.raises(openai.InternalServerError, match=NO_SCRIPT_LEFT):
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert len(llm_server.unexpected) == 1 and len(llm_server.requests) == 2
    with pytest.raises(AssertionError, match="1 unscripted request"):
        llm_server.assert_no_unexpected()


async def test_unexpected_opt_out_by_attribute(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    llm_server.allow_unexpected = True
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert llm_server.remaining == 0 and len(llm_server.unexpected) == 1


def test_sync_client_and_settings(llm_server: ScriptedLLMServer, settings: Any) -> None:
    """Sync tests work too, and the fixture points Django settings and the env at the server."""
    import os

    assert settings.OPENAI_BASE_URL == llm_server.base_url == os.environ["OPENAI_BASE_URL"]
    assert settings.ONEVALET_MODEL == "scripted-model" and settings.OPENAI_API_KEY == "test-key"
    assert llm_server.env["OPENAI_API_KEY"] == "test-key"
    llm_server.script(text("sync ok"))
    with openai.OpenAI(base_url=llm_server.base_url, api_key="x", max_retries=0) as sync_client:
        resp = sync_client.chat.completions.create(model="m", messages=MESSAGES)
    assert resp.choices[0].message.content == "sync ok"


def test_default_base_url_is_unreachable_without_llm_server(settings: Any) -> None:
    assert settings.OPENAI_BASE_URL == "http://127.0.0.1:9/v1"


async def test_zero_latency_reuses_connections(llm_server: ScriptedLLMServer, client: openai.AsyncOpenAI) -> None:
    """Keep-alive works, so benchmarks measure requests, not TCP handshakes (speed itself is
    measured in bench/, never asserted here)."""
    n = 200
    llm_server.script(*(text("ok", usage=(1, 1)) for _ in range(n)))
    await client.chat.completions.create(model="m", messages=MESSAGES)  # warm the connection
    opened = llm_server.connections_opened
    for _ in range(n - 1):
        await client.chat.completions.create(model="m", messages=MESSAGES)
    assert llm_server.connections_opened == opened  # keep-alive: no new connection
    assert llm_server.remaining == 0


def test_guard_refuses_non_loopback_socket(network_guard: Any) -> None:
    with pytest.raises(OSError, match="tests may not reach the network"):
        socket.create_connection(("203.0.113.7", 443), timeout=1)
    with pytest.raises(OSError, match="tests may not reach the network"):
        socket.getaddrinfo("api.openai.com", 443)
    assert network_guard.blocked == ["203.0.113.7:443", "api.openai.com:443"]
    network_guard.blocked.clear()  # expected here; otherwise teardown fails the test


async def test_guard_refuses_sdk_call_to_real_openai(network_guard: Any) -> None:
    async with openai.AsyncOpenAI(base_url="https://api.openai.com/v1", api_key="x", max_retries=0) as real:
        with pytest.raises(openai.APIConnectionError) as exc_info:
            await real.chat.completions.create(model="m", messages=MESSAGES)
    chain, err = [], exc_info.value
    while err is not None:
        chain.append(str(err))
        err = err.__cause__ or err.__context__
    assert any("tests may not reach the network" in message for message in chain), chain
    assert network_guard.blocked
    network_guard.blocked.clear()


def test_guard_allows_loopback(llm_server: ScriptedLLMServer) -> None:
    with socket.create_connection(("localhost", llm_server.port), timeout=1):
        pass
    with socket.create_connection(("127.0.0.1", llm_server.port), timeout=1):
        pass


def test_make_user_creates_profile(user: Any, other_user: Any, api_client: Any) -> None:
    assert user.username != other_user.username
    assert user.valet_profile.timezone == "UTC" and user.valet_profile.display_name == "Test User"
    assert user.check_password("pw")
    assert api_client.handler._force_user == user
