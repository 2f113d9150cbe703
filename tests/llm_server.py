"""A scripted, OpenAI-compatible HTTP server for the test suite.

Why a real server instead of a mocked client: the product talks to the LLM through the real
``openai`` SDK, and the interesting failures (status-code mapping, ``Retry-After``, SSE
parsing, tool-call delta accumulation, timeouts, connection reuse) live in that SDK and its
HTTP stack. A TCP server on 127.0.0.1 exercises all of it, and also serves other processes a
test starts (Celery workers, daphne) that cannot share an in-process mock.

Usage::

    server.script(text("hi"), tool_calls(("get_time", {"tz": "UTC"})), text("done"))
    # ... drive the product ...
    assert "tools" not in server.requests[-1].body

Each chat-completion request consumes one scripted step, first in first out. A request that
finds the queue empty gets HTTP 500 and is recorded in ``server.unexpected``.
"""

from __future__ import annotations

import http
import itertools
import json
import re
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union

DEFAULT_MODEL = "scripted-model"
NO_SCRIPT_LEFT = "scripted LLM server: no scripted response left"

_DEFAULT_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
                        404: "invalid_request_error", 429: "requests"}
_WORDS = re.compile(r"\S+\s*|\s+")


# --------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class ToolCall:
    """One scripted tool call; ``id`` None means "generate ``call_<n>`` when served"."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class Step:
    """One scripted response. Build it with the module-level helpers, not directly."""

    kind: str  # "text" | "tool_calls" | "error" | "hang" | "disconnect"
    content: str | None = None
    calls: tuple[ToolCall, ...] = ()
    usage: tuple[int, int] | None = None
    latency: float = 0.0
    finish_reason: str = "stop"
    status: int = 200
    error_body: Mapping[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    chunk_delay: float = 0.0


@dataclass
class RecordedRequest:
    """What the client sent: method, path, lower-cased headers and the parsed JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float = field(default_factory=time.monotonic)

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.body.get(key, default)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages") or []

    @property
    def last_message(self) -> dict[str, Any] | None:
        return self.messages[-1] if self.messages else None

    @property
    def tools(self) -> list[dict[str, Any]] | None:
        return self.body.get("tools")

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


StepLike = Union[Step, Callable[[RecordedRequest], Step]]


def text(content: str, *, usage: tuple[int, int] | None = None, latency: float = 0.0,
         finish_reason: str = "stop", chunk_delay: float = 0.0) -> Step:
    """An assistant text answer. ``chunk_delay`` spaces out the SSE chunks when streaming."""
    return Step("text", content=content, usage=usage, latency=latency, finish_reason=finish_reason,
                chunk_delay=chunk_delay)


def tool_calls(*calls: tuple[Any, ...], content: str | None = None, usage: tuple[int, int] | None = None,
               latency: float = 0.0, chunk_delay: float = 0.0) -> Step:
    """Assistant tool calls: each ``(name, args)`` or ``(id, name, args)``.

    ``args`` is a dict (sent as JSON) or a raw string, so a test can send invalid JSON.
    """
    parsed: list[ToolCall] = []
    for call in calls:
        if len(call) == 2:
            call_id, (name, args) = None, call
        elif len(call) == 3:
            call_id, name, args = call
        else:
            raise ValueError(f"tool call must be (name, args) or (id, name, args), got {call!r}")
        arguments = args if isinstance(args, str) else json.dumps(args)
        parsed.append(ToolCall(name=name, arguments=arguments, id=call_id))
    if not parsed:
        raise ValueError("tool_calls() needs at least one call")
    return Step("tool_calls", content=content, calls=tuple(parsed), usage=usage, latency=latency,
                finish_reason="tool_calls", chunk_delay=chunk_delay)


def error(status: int, *, message: str | None = None, code: str | None = None, type: str | None = None,
          retry_after: float | str | None = None, latency: float = 0.0,
          headers: Mapping[str, str] | None = None) -> Step:
    """An OpenAI-style error response ``{"error": {message, type, param, code}}``."""
    err_type = type or _DEFAULT_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message or f"scripted error {status}", "type": err_type, "param": None, "code": code}}
    extra = dict(headers or {})
    if retry_after is not None:
        extra["Retry-After"] = str(retry_after)
    return Step("error", status=status, error_body=body, headers=tuple(extra.items()), latency=latency)


def context_overflow(*, message: str | None = None) -> Step:
    """The 400 OpenAI returns when the prompt exceeds the model's context window."""
    return error(400, code="context_length_exceeded", type="invalid_request_error", message=message or (
        "This model's maximum context length is 8192 tokens. However, your messages resulted in more tokens. "
        "Please reduce the length of the messages."))


def hang() -> Step:
    """Never answer (until the server is reset or stopped): for client-timeout tests."""
    return Step("hang")


def disconnect(*, latency: float = 0.0) -> Step:
    """Close the connection without any response: for connection-error tests."""
    return Step("disconnect", latency=latency)


# --------------------------------------------------------------------------- server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 1024  # benchmarks open hundreds of connections at once
    owner: ScriptedLLMServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse-DNS lookup that can stall for
        # seconds in sandboxes; we know our own name.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout test, cancelled stream) is normal here, not a traceback.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the SDK's pooled client reuses one connection
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Without TCP_NODELAY, header/body writes meet delayed ACKs and each request costs ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, opened=True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, opened=False)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # silence per-request stderr lines

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path.split("?", 1)[0].rstrip("/") == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": owner.model, "object": "model", "created": 0, "owned_by": "onevalet-tests"}]})
        else:
            self._not_found({})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        if self.path.split("?", 1)[0].rstrip("/") == "/v1/chat/completions":
            self.server.owner._serve_chat(self, body)
        else:
            self._not_found(body)

    def _not_found(self, body: dict[str, Any]) -> None:
        self.server.owner._record_unexpected(self._record(body))
        self.send_json(404, {"error": {"message": f"scripted LLM server: no route {self.command} {self.path}",
                                       "type": "invalid_request_error", "param": None, "code": None}})

    def _record(self, body: dict[str, Any]) -> RecordedRequest:
        headers = {k.lower(): v for k, v in self.headers.items()}
        return RecordedRequest(self.command, self.path, headers, body if isinstance(body, dict) else {"_body": body})

    def send_json(self, status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        """Status line, headers and body in ONE write: cheap, and no Nagle stalls."""
        data = json.dumps(payload, separators=(",", ":")).encode()
        self.wfile.write(self._head(status, [("Content-Type", "application/json"),
                                             ("Content-Length", str(len(data))), *headers]) + data)

    def send_sse(self, events: list[bytes], delay: float, release: threading.Event) -> None:
        """Send SSE events with chunked transfer encoding, so they arrive as a real stream."""
        self.wfile.write(self._head(200, [("Content-Type", "text/event-stream; charset=utf-8"),
                                          ("Cache-Control", "no-cache"), ("Transfer-Encoding", "chunked")]))
        chunks = [b"%x\r\n%s\r\n" % (len(e), e) for e in events] + [b"0\r\n\r\n"]
        if delay <= 0:
            self.wfile.write(b"".join(chunks))
            return
        for chunk in chunks:
            self.wfile.write(chunk)
            if release.wait(delay):
                self.close_connection = True
                return

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "Scripted"
        lines = [f"HTTP/1.1 {status} {phrase}", *(f"{k}: {v}" for k, v in headers)]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class ScriptedLLMServer:
    """An OpenAI-compatible chat-completions server answering from a FIFO script.

    Thread-safe: requests are served on one thread per connection, so concurrent clients and
    other processes can use it at once. ``requests[i]`` is the request that consumed step ``i``.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, model: str = DEFAULT_MODEL) -> None:
        self.host, self.model = host, model
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self.allow_unexpected = False  # a test expecting unscripted requests sets this (or the marker)
        self.connections_opened = 0  # lets a test assert connection reuse (keep-alive)
        # Benchmarks: answer from this function when the script is empty, and keep no log.
        self.responder: Callable[[RecordedRequest], Step] | None = None
        self.record = True
        self._requested_port = port
        self._queue: deque[StepLike] = deque()
        self._lock = threading.Lock()
        self._release = threading.Event()  # set on reset/stop: wakes hung and delayed handlers
        self._ids = itertools.count(1)
        self._call_ids = itertools.count(1)
        self._sockets: set[socket.socket] = set()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        if self._httpd is not None:
            return self
        self._httpd = _HTTPServer((self.host, self._requested_port), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"scripted-llm-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, wake hung handlers and drop open keep-alive connections."""
        if self._httpd is None:
            return
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("scripted LLM server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What to pass as ``AsyncOpenAI(base_url=...)`` / ``OPENAI_BASE_URL``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def env(self) -> dict[str, str]:
        """Environment for subprocesses (Celery, daphne) so they talk to this server."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "test-key", "ONEVALET_MODEL": self.model}

    # -- script -----------------------------------------------------------------------

    def script(self, *steps: StepLike) -> ScriptedLLMServer:
        """Append steps; each chat-completion request consumes one, in order."""
        for step in steps:
            if not isinstance(step, Step) and not callable(step):
                raise TypeError(f"not a step: {step!r} (use text(), tool_calls(), error(), ...)")
        with self._lock:
            self._queue.extend(steps)
        return self

    def reset(self) -> None:
        """Forget script, requests and unexpected; release hung handlers; restart ids at 1."""
        with self._lock:
            self._queue.clear()
            self.requests = []
            self.unexpected = []
            self.allow_unexpected = False
            self._ids = itertools.count(1)
            self._call_ids = itertools.count(1)
            old, self._release = self._release, threading.Event()
        old.set()

    @property
    def remaining(self) -> int:
        """Steps not consumed yet (assert ``== 0`` to prove the whole script ran)."""
        return len(self._queue)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until ``count`` chat requests arrived (for work done by other processes/threads)."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} LLM requests within {timeout}s, got {len(self.requests)}")
            time.sleep(0.01)
        return list(self.requests)

    def assert_no_unexpected(self) -> None:
        if self.unexpected:
            lines = [f"  {r.method} {r.path}: last message {r.last_message!r}" for r in self.unexpected]
            raise AssertionError(f"scripted LLM server got {len(self.unexpected)} unscripted request(s):\n"
                                 + "\n".join(lines))

    # -- serving ----------------------------------------------------------------------

    def _track(self, sock: socket.socket, *, opened: bool) -> None:
        with self._lock:
            if opened:
                self._sockets.add(sock)
                self.connections_opened += 1
            else:
                self._sockets.discard(sock)

    def _record_unexpected(self, request: RecordedRequest) -> None:
        with self._lock:
            self.unexpected.append(request)

    def _serve_chat(self, handler: _Handler, body: dict[str, Any]) -> None:
        request = handler._record(body)
        with self._lock:
            if self.record:
                self.requests.append(request)
            step: StepLike | None = self._queue.popleft() if self._queue else self.responder
            release = self._release
            if step is None:
                self.unexpected.append(request)
        if step is None:
            handler.send_json(500, {"error": {"message": NO_SCRIPT_LEFT, "type": "server_error",
                                              "param": None, "code": None}})
            return
        if not isinstance(step, Step):
            step = step(request)
        if step.kind == "hang":
            release.wait()
            handler.close_connection = True
            return
        if step.latency > 0 and release.wait(step.latency):
            handler.close_connection = True  # reset/stop while waiting: drop the request
            return
        if step.kind == "disconnect":
            handler.close_connection = True
            return
        if step.kind == "error":
            handler.send_json(step.status, step.error_body, step.headers)
            return
        with self._lock:
            completion_id = f"chatcmpl-{next(self._ids)}"
            calls = [(c.id or f"call_{next(self._call_ids)}", c.name, c.arguments) for c in step.calls]
        usage = self._usage(step, request, calls)
        model = request.get("model") or self.model
        if request.stream:
            include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            events = _stream_events(completion_id, model, step, calls, usage if include_usage else None)
            handler.send_sse(events, step.chunk_delay, release)
        else:
            handler.send_json(200, _completion(completion_id, model, step, calls, usage))

    @staticmethod
    def _usage(step: Step, request: RecordedRequest, calls: list[tuple[str, str, str]]) -> dict[str, int]:
        if step.usage is not None:
            prompt, completion = step.usage
        else:  # a cheap estimate, so usage is always present
            prompt = len(json.dumps(request.messages)) // 4
            completion = (len(step.content or "") + sum(len(n) + len(a) for _, n, a in calls)) // 4 + 1
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


# --------------------------------------------------------------------------- payloads


def _completion(cid: str, model: str, step: Step, calls: list[tuple[str, str, str]],
                usage: dict[str, int]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.content, "refusal": None}
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, n, a in calls]
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": step.finish_reason, "logprobs": None}],
            "usage": usage, "system_fingerprint": None}


def _split_arguments(arguments: str) -> list[str]:
    """2-3 pieces (when long enough), like OpenAI's fragmentary argument deltas."""
    if len(arguments) < 2:
        return [arguments]
    size = max(1, -(-len(arguments) // 3))
    return [arguments[i:i + size] for i in range(0, len(arguments), size)]


def _stream_events(cid: str, model: str, step: Step, calls: list[tuple[str, str, str]],
                   usage: dict[str, int] | None) -> list[bytes]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason,
                                                "logprobs": None}]}
        if usage is not None:
            payload["usage"] = None
        return payload

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [chunk({"content": word}) for word in _WORDS.findall(step.content or "")]
    for index, (call_id, name, arguments) in enumerate(calls):
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                   for piece in _split_arguments(arguments)]
    chunks.append(chunk({}, step.finish_reason))
    if usage is not None:
        chunks.append({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [], "usage": usage})
    events = [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in chunks]
    events.append(b"data: [DONE]\n\n")
    return events
