"""A paused agent written by another process is resumed by this one (shared database)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from orchestrator.services import conversation_create
from orchestrator.types import RunStatus
from pool.models import AgentPoolEntry
from tests.llm_server import text
from tests.pool.conftest import route

pytestmark = [pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]

CREATE_ENTRY = """
from orchestrator.registry import load_tool_modules
load_tool_modules()
from orchestrator.agents import agent_registry, schema_version
from pool.services import pool_entry_create
agent_cls = agent_registry.get("ReminderAgent")
agent = agent_cls()
import asyncio
result = asyncio.run(agent.start({"what": "water the plants"}))
entry = pool_entry_create(owner_id={owner}, conversation_id="{conversation}", agent_type="ReminderAgent",
                          schema_version=schema_version(agent_cls), snapshot=agent.snapshot(), tool_call_id="call_x",
                          ttl_minutes=30, max_per_tenant=5)
print(entry.id)
"""


def _database_url() -> str | None:
    """The test database as a URL another process can open, or None (in-memory SQLite)."""
    db = connection.settings_dict
    if db["ENGINE"].endswith("postgresql"):
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    name = str(db["NAME"])
    if "memory" in name or name == ":memory:":
        return None
    return f"sqlite:///{name}"


async def test_entry_created_by_another_process_is_resumed_here(make_orchestrator: Any, llm_server: Any,
                                                                user: Any) -> None:
    url = _database_url()
    if url is None:
        pytest.skip("the test database is in-memory SQLite; run with DATABASE_URL (Postgres) for this test")
    conversation = await sync_to_async(conversation_create)(owner_id=user.pk, title="plants")
    env = {**os.environ, "DATABASE_URL": url, "ONEVALET_VAR_DIR": str(settings.VAR_DIR),
           "ONEVALET_TOOL_MODULES": "orchestrator.example_agents"}
    code = CREATE_ENTRY.replace("{owner}", str(user.pk)).replace("{conversation}", str(conversation.id))
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    entry = await sync_to_async(AgentPoolEntry.objects.get)(id=done.stdout.strip().splitlines()[-1])
    assert entry.status == AgentPoolEntry.Status.WAITING_FOR_INPUT

    from orchestrator.registry import load_tool_modules
    from orchestrator.tools import registry

    load_tool_modules()
    orchestrator = make_orchestrator(tools=registry.subset(["ReminderAgent"]))
    llm_server.script(route(when="tomorrow 07:45"), text("All set."))
    outcome = await orchestrator.handle_message(user_id=user.pk, content="tomorrow 07:45",
                                                conversation_id=str(conversation.id))
    assert outcome.result.status == RunStatus.COMPLETED and outcome.result.response == "All set."
    result = llm_server.requests[-1].messages[-1]["content"]
    assert result.startswith("Reminder #") and "'water the plants'" in result
    assert not await sync_to_async(AgentPoolEntry.objects.filter(id=entry.id).exists)()
