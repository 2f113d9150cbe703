"""Suite-wide fixtures: the scripted LLM server, a network guard, users and an API client.

App-specific fixtures belong in ``tests/<app>/conftest.py``; keep this file small.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.factories import make_user
from tests.llm_server import ScriptedLLMServer

UNREACHABLE_BASE_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens, fails fast


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "llm_unexpected_ok: the test expects unscripted requests to the scripted LLM server")


# --------------------------------------------------------------------------- network guard


class NetworkBlockedError(ConnectionRefusedError):
    """Raised for any connection (or DNS lookup) to a non-loopback host during a test.

    An OSError subclass, so HTTP clients map it to their ordinary connection error; because
    product code may swallow that, every attempt is also recorded and fails the test.
    """


_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
_HOSTNAME = socket.gethostname().lower()


def _is_local(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    host = str(host).strip("[]").split("%", 1)[0].lower().rstrip(".")
    if host in ("", _HOSTNAME) or host in _LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or ip.is_unspecified or bool(mapped and mapped.is_loopback)


class NetworkGuard:
    """Refuses non-loopback connections; ``blocked`` lists the refused attempts.

    A test that provokes a refusal on purpose clears ``blocked`` before it ends.
    """

    def __init__(self) -> None:
        self.blocked: list[str] = []
        self._lock = threading.Lock()

    def refuse(self, what: str, host: Any, port: Any) -> NetworkBlockedError:
        target = f"{host}:{port}"
        with self._lock:
            self.blocked.append(target)
        return NetworkBlockedError(
            f"tests may not reach the network: {what} {target} refused by the test network guard "
            "(use the llm_server fixture for LLM calls; only loopback and unix sockets are allowed)")

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
        real_getaddrinfo = socket.getaddrinfo
        guard = self

        def check(sock: socket.socket, address: Any) -> None:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
                if not _is_local(address[0]):
                    raise guard.refuse("connection to", address[0], address[1])

        def connect(self: socket.socket, address: Any) -> None:
            check(self, address)
            return real_connect(self, address)

        def connect_ex(self: socket.socket, address: Any) -> int:
            check(self, address)
            return real_connect_ex(self, address)

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if not _is_local(host):
                raise guard.refuse("DNS lookup of", host, port)
            return real_getaddrinfo(host, port, *args, **kwargs)

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[NetworkGuard]:
    """Every test: no real network, and the LLM points at a dead loopback port by default.

    Patching is process-wide (all threads), so it also covers the SDK's executor threads.
    Subprocesses are not patched; they get a safe OPENAI_BASE_URL through the environment.
    """
    guard = NetworkGuard()
    guard.install(monkeypatch)
    settings.OPENAI_BASE_URL = UNREACHABLE_BASE_URL
    monkeypatch.setenv("OPENAI_BASE_URL", UNREACHABLE_BASE_URL)
    yield guard
    if guard.blocked:
        pytest.fail(f"test tried to reach the network: {', '.join(guard.blocked)}", pytrace=False)


# --------------------------------------------------------------------------- LLM server


@pytest.fixture(scope="session")
def llm_server_session() -> Iterator[ScriptedLLMServer]:
    """One server for the whole session (per xdist worker); ``llm_server`` resets it per test."""
    server = ScriptedLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm_server(llm_server_session: ScriptedLLMServer, network_guard: NetworkGuard, settings: Any,
               monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[ScriptedLLMServer]:
    """The scripted server, empty, with Django settings and env pointing the product at it.

    Teardown fails the test if any request found the script empty, unless the test is marked
    ``@pytest.mark.llm_unexpected_ok`` or sets ``llm_server.allow_unexpected = True``.
    """
    server = llm_server_session
    server.reset()
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.ONEVALET_MODEL = server.model
    for key, value in server.env.items():
        monkeypatch.setenv(key, value)
    yield server
    allowed = server.allow_unexpected or request.node.get_closest_marker("llm_unexpected_ok") is not None
    unexpected = list(server.unexpected)
    server.reset()  # also releases handlers still hanging for this test
    if unexpected and not allowed:
        lines = "\n".join(f"  {r.method} {r.path}: last message {r.last_message!r}" for r in unexpected)
        pytest.fail(f"scripted LLM server got {len(unexpected)} unscripted request(s):\n{lines}", pytrace=False)


@pytest.fixture
def make_orchestrator(llm_server: Any, settings: Any):
    """Build an Orchestrator against the scripted server; ``config`` overrides loop knobs."""

    from orchestrator.config import ReactLoopConfig
    from orchestrator.llm import LLMClient
    from orchestrator.orchestrator import Orchestrator
    from tests.orchestrator.conftest import build_test_tools

    def factory(tools: Any = None, system_prompt: str = "You are Koi, a cheerful test persona.",
                **config: Any) -> Any:
        defaults = {"llm_retry_base_delay": 0.01, "tool_execution_timeout": 2.0}
        llm = LLMClient(api_key="test-key", base_url=llm_server.base_url, model=llm_server.model, timeout=5.0)
        return Orchestrator(llm=llm, tools=tools if tools is not None else build_test_tools(),
                            config=ReactLoopConfig.from_mapping({**defaults, **config}), system_prompt=system_prompt)

    return factory


# --------------------------------------------------------------------------- users


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """Users are made in most tests; PBKDF2 would dominate the suite's run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def user(db: None) -> Any:
    return make_user(display_name="Test User")


@pytest.fixture
def other_user(db: None) -> Any:
    return make_user(display_name="Other User")


@pytest.fixture
def api_client(user: Any) -> Any:
    """DRF APIClient authenticated as ``user`` (no token or session dance)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user=user)
    return client


# --------------------------------------------------------------------------- Redis


@pytest.fixture(scope="session", autouse=True)
def redis_server() -> Iterator[str]:
    """The Redis the suite talks to: REDIS_URL when given (CI), else the embedded one.

    An embedded server started here is shut down at the end of the session, so a test run
    leaves no process behind.
    """
    from pathlib import Path

    from django.conf import settings

    from onevalet_site import embedded_redis

    started = False
    if settings.EMBEDDED_REDIS:
        path = embedded_redis.socket_path(Path(settings.VAR_DIR))
        started = not embedded_redis.is_answering(path)
        embedded_redis.ensure_running(Path(settings.VAR_DIR))
    yield settings.REDIS_URL
    if started:
        embedded_redis.stop(Path(settings.VAR_DIR))
