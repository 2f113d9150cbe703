"""Fixtures for triggers: eager Celery, an orchestrator on the scripted LLM, a private stream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from orchestrator.config import ReactLoopConfig
from orchestrator.llm import LLMClient
from orchestrator.orchestrator import Orchestrator
from orchestrator.tools import ToolRegistry
from tests.factories import make_user


@pytest.fixture
def eager_celery() -> Iterator[Any]:
    """Tasks run in-process when enqueued (``delay``/``apply_async``), errors propagate."""
    from onevalet_site.celery import app

    before = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.update(task_always_eager=True, task_eager_propagates=True)
    yield app
    app.conf.update(task_always_eager=before[0], task_eager_propagates=before[1])


@pytest.fixture
def trigger_orchestrator(llm_server: Any, monkeypatch: pytest.MonkeyPatch) -> Orchestrator:
    """The process orchestrator (what executors use) wired to the scripted server."""
    import orchestrator.orchestrator as module
    import triggers.assistant_tools as assistant_tools

    tools = ToolRegistry()
    for name in ("create_reminder", "schedule_task", "list_tasks", "cancel_task"):
        tools.register(getattr(assistant_tools, name))
    llm = LLMClient(api_key="test-key", base_url=llm_server.base_url, model=llm_server.model, timeout=5.0)
    orch = Orchestrator(llm=llm, tools=tools, config=ReactLoopConfig.from_mapping({"llm_retry_base_delay": 0.01}),
                        system_prompt="You are a test valet.")
    monkeypatch.setattr(module, "_default", orch)
    return orch


@pytest.fixture
def berlin_user(db: None) -> Any:
    return make_user(display_name="Berlin", timezone="Europe/Berlin", email="b@example.test")


@pytest.fixture
def bus() -> Iterator[Any]:
    """An EventBus on a stream of its own, deleted afterwards."""
    from triggers.event_bus import EventBus

    event_bus = EventBus(stream=f"test:events:{uuid.uuid4().hex}")
    yield event_bus
    event_bus.client.delete(event_bus.stream)
