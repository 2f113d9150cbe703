"""Fixtures for the client surfaces: the process-wide orchestrator wired to the scripted
LLM server, token-authenticated websocket communicators, and a real daphne server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from orchestrator import orchestrator as orchestrator_module
from orchestrator.config import ReactLoopConfig
from orchestrator.llm import LLMClient
from orchestrator.orchestrator import Orchestrator
from tests.orchestrator.conftest import build_test_tools

ORIGIN = (b"origin", b"http://localhost")


@pytest.fixture
def orchestrator(llm_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Orchestrator]:
    """``get_orchestrator()`` returns one built against the scripted server with test tools."""
    llm = LLMClient(api_key="test-key", base_url=llm_server.base_url, model=llm_server.model, timeout=5.0)
    orch = Orchestrator(llm=llm, tools=build_test_tools(), system_prompt="You are a test persona.",
                        config=ReactLoopConfig.from_mapping({"llm_retry_base_delay": 0.01,
                                                             "tool_execution_timeout": 2.0}))
    monkeypatch.setattr(orchestrator_module, "_default", orch)
    yield orch


@pytest.fixture
def token(user: Any) -> str:
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=user).key


class Socket:
    """A ``WebsocketCommunicator`` speaking JSON, with waits on event types."""

    def __init__(self, communicator: WebsocketCommunicator) -> None:
        self.communicator = communicator
        self.received: list[dict[str, Any]] = []

    async def send(self, frame: Any) -> None:
        await self.communicator.send_to(text_data=frame if isinstance(frame, str) else json.dumps(frame))

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        event = json.loads(await self.communicator.receive_from(timeout=timeout))
        self.received.append(event)
        return event

    async def until(self, kind: str, timeout: float = 10) -> list[dict[str, Any]]:
        """Events up to and including the first of type ``kind``."""
        got: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while True:
                got.append(await self.receive(timeout=timeout))
                if got[-1]["type"] == kind:
                    return got

    async def close(self) -> None:
        await self.communicator.disconnect()


@pytest.fixture
def connect() -> Any:
    """``await connect(token=..., headers=...)`` -> (connected, subprotocol, Socket)."""
    from onevalet_site.asgi import application

    opened: list[Socket] = []

    async def factory(*, token: str | None = None, origin: tuple[bytes, bytes] | None = ORIGIN,
                      headers: list[tuple[bytes, bytes]] | None = None) -> tuple[bool, Any, Socket]:
        all_headers = [(b"host", b"localhost"), *(headers or [])]
        if origin is not None:
            all_headers.append(origin)
        subprotocols = ["onevalet", f"token.{token}"] if token else None
        communicator = WebsocketCommunicator(application, "/ws/chat/", headers=all_headers, subprotocols=subprotocols)
        connected, subprotocol = await communicator.connect(timeout=5)
        socket = Socket(communicator)
        opened.append(socket)
        return connected, subprotocol, socket

    return factory


@pytest.fixture(scope="session")
def live(llm_server_session: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real daphne for the session, with two users: ``live.tokens["alice"|"bob"]``."""
    from tests.surfaces.live import LiveServer, live_server_env

    workdir = tmp_path_factory.mktemp("daphne")
    server = LiveServer(workdir=workdir, env=live_server_env(workdir, llm_server_session.env))
    server.start()
    server.tokens = server.create_users("alice", "bob")
    yield server
    server.stop()
