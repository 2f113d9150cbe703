"""Fixtures for triggers: eager Celery, an orchestrator on the scripted LLM, a private stream,
and real Celery worker/beat processes on a database they share with the test."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

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


# --------------------------------------------------------------------------- real processes
#
# The process tests run a real Celery worker and beat. Those processes cannot see pytest's
# in-memory SQLite test database, and pytest-django builds the test database once per
# session (whichever test asks first decides its settings), so a per-directory override of
# the test database name would be silently ignored in a full-suite run. Instead the process
# tests get a database of their own — a SQLite file under VAR_DIR, or a throw-away database
# on the suite's Postgres — migrated once per module, and the test process's ``default``
# connection points at it while such a test runs.

ROOT = Path(__file__).resolve().parents[2]


def _process_database_url(tag: str) -> tuple[str, Callable[[], None]]:
    """A fresh, empty database URL for subprocesses and a function that removes it."""
    from django.conf import settings

    database_url = os.environ.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        import psycopg

        parsed = urlparse(database_url)
        name = f"{parsed.path.lstrip('/') or 'onevalet'}_{tag}_{secrets.token_hex(3)}"
        admin_url = urlunparse(parsed._replace(path="/postgres"))
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

        def drop() -> None:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        return urlunparse(parsed._replace(path=f"/{name}")), drop
    path = Path(settings.VAR_DIR) / f"{tag}-{secrets.token_hex(3)}.db"

    def remove() -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    return f"sqlite:///{path}", remove


def subprocess_env(database_url: str, llm_env: dict[str, str] | None = None, *,
                   settings_module: str = "onevalet_site.settings") -> dict[str, str]:
    """The environment of a worker/beat/manage.py child: same DB, broker and var dir as the test."""
    from django.conf import settings

    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.update({"DATABASE_URL": database_url, "ONEVALET_VAR_DIR": str(settings.VAR_DIR),
                "DJANGO_SETTINGS_MODULE": settings_module, "PYTHONPATH": str(ROOT),
                "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"})
    if settings.EMBEDDED_REDIS:
        env.pop("REDIS_URL", None)
    else:
        env["REDIS_URL"] = settings.REDIS_URL
    env.update(llm_env or {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "test-key"})
    return env


@contextmanager
def default_database(database_url: str) -> Iterator[None]:
    """Point this thread's ``default`` connection at ``database_url``; restore it afterwards.

    The previous wrapper is kept, not closed: pytest's in-memory test database lives only as
    long as its connection does.
    """
    from django.db import connections
    from django.db.utils import load_backend

    from onevalet_site.env import database_from_url

    config = {**connections.settings["default"], **database_from_url(database_url)}
    wrapper = load_backend(config["ENGINE"]).DatabaseWrapper(config, "default")
    previous = connections["default"]
    connections["default"] = wrapper
    try:
        yield
    finally:
        wrapper.close()
        connections["default"] = previous


@pytest.fixture(scope="module")
def process_database_url() -> Iterator[str]:
    """A migrated database the test and its Celery subprocesses share (one per module)."""
    url, remove = _process_database_url("trigproc")
    try:
        done = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT,
                              env=subprocess_env(url), capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        yield url
    finally:
        remove()


@pytest.fixture
def process_db(process_database_url: str, django_db_blocker: Any) -> Iterator[str]:
    """This test's ORM on the shared process database; trigger state is wiped afterwards.

    Wiping deletes every trigger through the service (so its beat row goes too) and the
    users' notifications, so the next test's beat does not keep firing this test's tasks.
    """
    with django_db_blocker.unblock(), default_database(process_database_url):
        try:
            yield process_database_url
        finally:
            from django.contrib.auth import get_user_model

            from triggers import services
            from triggers.models import TriggerTask

            for task in TriggerTask.objects.all():
                services.trigger_task_delete(owner_id=task.owner_id, task_id=task.pk)
            get_user_model().objects.all().delete()


@dataclass
class CeleryProcesses:
    """Real ``celery worker``/``celery beat`` children, each in a process group of its own.

    Logs go to files under ``log_dir`` (read by the tests, shown when one fails). ``stop_all``
    — always called by the fixture — sends SIGTERM to every group, then SIGKILL, and waits
    until no process of any group is left, so a test leaves nothing running.
    """

    env: dict[str, str]
    log_dir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    killed: bool = False

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it until it exits
        try:
            process = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        self.processes[name] = process
        return process

    def start_worker(self, name: str = "worker", concurrency: int = 2) -> subprocess.Popen[bytes]:
        """A prefork worker on the default queue (``celery``, as ``task_default_queue`` names it)."""
        from onevalet_site.celery import app

        return self._start(name, [sys.executable, "-m", "celery", "-A", "onevalet_site", "worker",
                                  "--pool", "prefork", "--concurrency", str(concurrency), "--loglevel", "INFO",
                                  "-Q", app.conf.task_default_queue, "--hostname", f"{name}-{secrets.token_hex(3)}@%h",
                                  "--without-gossip", "--without-mingle", "--without-heartbeat"])

    def start_beat(self, name: str = "beat") -> subprocess.Popen[bytes]:
        return self._start(name, [sys.executable, "-m", "celery", "-A", "onevalet_site", "beat", "--loglevel", "INFO",
                                  "-S", "django_celery_beat.schedulers:DatabaseScheduler"])

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_for_log(self, name: str, needle: str, timeout: float = 60.0, *, after: int = 0) -> int:
        """Wait until ``needle`` appears in the log past offset ``after``; its offset."""
        deadline = time.monotonic() + timeout
        while True:
            process = self.processes[name]
            found = self.log(name).find(needle, after)
            if found >= 0:
                return found
            if process.poll() is not None:
                raise AssertionError(f"{name} exited ({process.returncode}):\n{self.log(name)[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} not in the {name} log within {timeout}s:\n{self.log(name)[-4000:]}")
            time.sleep(0.1)  # polling a log another process writes: there is no event to wait on

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 20.0) -> None:
        """Signal the whole process group and wait until none of its processes is left."""
        from onevalet_site.supervisor import group_alive

        process = self.processes[name]
        self.killed = self.killed or sig == signal.SIGKILL
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        deadline = time.monotonic() + timeout
        while group_alive(process.pid):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            if time.monotonic() > deadline + 10:
                raise AssertionError(f"process group of {name} survived SIGKILL")
            time.sleep(0.05)
        process.wait(timeout=5)

    def stop_all(self) -> None:
        for name, process in self.processes.items():
            if process.returncode is None:
                self.kill(name, signal.SIGTERM)
        if self.killed:
            self._forget_unacked()

    @staticmethod
    def _forget_unacked() -> None:
        """Drop the messages a SIGKILLed worker left unacknowledged in the broker.

        Kombu's Redis transport keeps them (the embedded Redis even across sessions, it
        persists) and restores them to the queue after the visibility timeout: an hour
        later a worker of another test would fire a stale ``task_id`` in its own database.
        Only this test's workers used the broker, and all of them are stopped now.
        """
        import redis
        from django.conf import settings

        client = redis.Redis.from_url(settings.REDIS_URL)
        try:
            client.delete("unacked", "unacked_index", "unacked_mutex")
        finally:
            client.close()


@pytest.fixture
def celery_processes(process_db: str, llm_server: Any, tmp_path: Path) -> Iterator[CeleryProcesses]:
    """Start/kill real Celery processes on the process database and the scripted LLM.

    Their settings are ``tests.triggers.process_settings`` (a run lease of seconds, not a minute).

    The default queue is purged first: messages left in the shared broker by earlier tests
    would otherwise be executed by this worker against this database.
    """
    from onevalet_site.celery import app

    app.control.purge()
    processes = CeleryProcesses(env=subprocess_env(process_db, llm_server.env,
                                                   settings_module="tests.triggers.process_settings"),
                                log_dir=tmp_path)
    try:
        yield processes
    finally:
        processes.stop_all()
