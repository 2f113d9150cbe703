"""The LLM client: the official ``openai`` SDK for transport, parsing, streaming and errors.

The SDK is used for everything but building the request body. ``chat.completions.create``
re-validates and transforms the whole message list on every call; in a tool loop whose
history grows each turn that transformation dominates the client's cost. OneValet keeps
each message's JSON (messages are never mutated once appended, so identity is a safe
cache key) and hands the SDK the finished bytes through ``AsyncOpenAI.post(content=...)``.
The HTTP request, response model, SSE stream and error classes are the SDK's own.

Retries are not the SDK's (``max_retries=0``): the loop's strategy table in
``llm_errors.py`` decides what a failure means.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from orchestrator.types import LLMResponse, TokenUsage, ToolCall

Message = dict[str, Any]
DeltaSink = Callable[[str], Awaitable[None]]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


class MessageEncoder:
    """Serialised JSON per message object, so a growing history is encoded once per message."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[Message, bytes]] = {}

    def encode(self, message: Message) -> bytes:
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        encoded = _dumps(message)
        self._cache[id(message)] = (message, encoded)
        return encoded

    def encode_list(self, messages: list[Message]) -> bytes:
        if len(self._cache) > 4 * len(messages) + 64:  # drop entries of messages trimmed away
            live = {id(m) for m in messages}
            self._cache = {k: v for k, v in self._cache.items() if k in live}
        return b"[" + b",".join(self.encode(m) for m in messages) + b"]"


class LLMClient:
    """One OpenAI-compatible endpoint and model."""

    def __init__(self, *, api_key: str, base_url: str | None, model: str, timeout: float = 60.0,
                 max_output_tokens: int | None = None, client: AsyncOpenAI | None = None) -> None:
        self.model = model
        self.api_key = api_key
        self.base_url = base_url
        self.timeout = timeout
        self.max_output_tokens = max_output_tokens
        self.configured = bool(api_key)
        self.encoder = MessageEncoder()
        self._tools_cache: tuple[int, list[dict[str, Any]] | None, bytes] = (0, None, b"")
        self._fixed_client = client
        # The SDK's connection pool belongs to the event loop that opened it. A Celery task
        # or a management command starts a new loop per call, so the process-wide client
        # keeps one SDK client per loop instead of failing with "Event loop is closed".
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncOpenAI] = weakref.WeakKeyDictionary()

    @property
    def client(self) -> AsyncOpenAI:
        if self._fixed_client is not None:
            return self._fixed_client
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = AsyncOpenAI(api_key=self.api_key or "missing", base_url=self.base_url, timeout=self.timeout,
                                 max_retries=0)
            self._clients[loop] = client
        return client

    @classmethod
    def from_settings(cls, *, max_output_tokens: int | None = None) -> LLMClient:
        from django.conf import settings

        return cls(api_key=settings.OPENAI_API_KEY, base_url=settings.OPENAI_BASE_URL, model=settings.ONEVALET_MODEL,
                   timeout=settings.ONEVALET_LLM_TIMEOUT, max_output_tokens=max_output_tokens)

    def _tools_json(self, tools: list[dict[str, Any]]) -> bytes:
        if self._tools_cache[1] is tools:
            return self._tools_cache[2]
        encoded = _dumps(tools)
        self._tools_cache = (id(tools), tools, encoded)
        return encoded

    def build_body(self, messages: list[Message], tools: list[dict[str, Any]] | None, *, stream: bool) -> bytes:
        parts = [b'{"model":', _dumps(self.model), b',"messages":', self.encoder.encode_list(messages)]
        if tools:
            parts += [b',"tools":', self._tools_json(tools)]
        if self.max_output_tokens:
            parts += [b',"max_tokens":', str(self.max_output_tokens).encode()]
        if stream:
            parts.append(b',"stream":true,"stream_options":{"include_usage":true}')
        parts.append(b"}")
        return b"".join(parts)

    async def complete(self, messages: list[Message], tools: list[dict[str, Any]] | None, *,
                       on_delta: DeltaSink | None = None) -> LLMResponse:
        """One chat completion; streamed (``on_delta`` gets each text delta) when a sink is given."""
        if not self.configured:
            raise LLMNotConfigured()
        body = self.build_body(messages, tools, stream=on_delta is not None)
        options: dict[str, Any] = {"headers": {"Content-Type": "application/json"}, "security": {"bearer_auth": True}}
        if on_delta is None:
            completion = await self.client.post("/chat/completions", cast_to=ChatCompletion, content=body,
                                                options=options)
            return _from_completion(completion)
        stream = await self.client.post("/chat/completions", cast_to=ChatCompletion, content=body, options=options,
                                        stream=True, stream_cls=AsyncStream[ChatCompletionChunk])
        return await _accumulate(stream, on_delta)


class LLMNotConfigured(openai.OpenAIError):
    """No API key: the operator has to set OPENAI_API_KEY (and maybe OPENAI_BASE_URL)."""

    def __init__(self) -> None:
        super().__init__("no LLM is configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI server)")


class LLMBadResponse(openai.OpenAIError):
    """The server answered 200 with something that is not a usable completion."""


def _usage(raw: Any) -> TokenUsage:
    if raw is None:
        return TokenUsage()
    return TokenUsage(input_tokens=raw.prompt_tokens or 0, output_tokens=raw.completion_tokens or 0)


def _from_completion(completion: ChatCompletion) -> LLMResponse:
    if not completion.choices:
        raise LLMBadResponse("the LLM answered with no choices")
    choice = completion.choices[0]
    message = choice.message
    calls = [ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "")
             for c in (message.tool_calls or []) if getattr(c, "function", None) is not None]
    return LLMResponse(content=message.content or "", tool_calls=calls, usage=_usage(completion.usage),
                       finish_reason=choice.finish_reason)


async def _accumulate(stream: AsyncStream[ChatCompletionChunk], on_delta: DeltaSink) -> LLMResponse:
    """Join a streamed completion: text deltas go to ``on_delta`` as they arrive."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage = TokenUsage()
    finish_reason = None
    async with stream:
        async for chunk in stream:
            if chunk.usage is not None:
                usage = _usage(chunk.usage)
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    text.append(delta.content)
                    await on_delta(delta.content)
                for call_delta in delta.tool_calls or ():
                    slot = calls.setdefault(call_delta.index, {"id": "", "name": "", "arguments": []})
                    if call_delta.id:
                        slot["id"] = call_delta.id
                    if call_delta.function is not None:
                        if call_delta.function.name:
                            slot["name"] += call_delta.function.name
                        if call_delta.function.arguments:
                            slot["arguments"].append(call_delta.function.arguments)
                if choice.finish_reason:
                    finish_reason = choice.finish_reason
    tool_calls = [ToolCall(id=slot["id"] or f"call_{index}", name=slot["name"], arguments="".join(slot["arguments"]))
                  for index, slot in sorted(calls.items())]
    return LLMResponse(content="".join(text), tool_calls=tool_calls, usage=usage, finish_reason=finish_reason)
