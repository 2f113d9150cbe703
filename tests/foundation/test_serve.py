"""``manage.py serve`` end to end: a real server in a temporary var dir on a free port.

It must answer HTTP, have a Celery worker that answers on the broker and a live beat, and
leave no process behind — child or grandchild — after Ctrl-C (SIGINT), or after one of its
children dies.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.foundation.helpers import (
    PYTHON, REPO, children_of, clean_env, free_port, process_group_members, wait_for,
)

pytestmark = [pytest.mark.celery, pytest.mark.timeout(360)]

START_TIMEOUT = 180  # migrations on an empty database plus four processes, on a slow CI core


@dataclass
class RunningServe:
    process: subprocess.Popen[bytes]
    port: int
    env: dict[str, str]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def status(self, path: str) -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return None

    def children(self) -> dict[str, int]:
        """Role -> pid of the supervised children, recognised by their command lines."""
        roles = {"daphne": "-m daphne", "worker": " worker ", "beat": " beat ", "redis": "redis-server"}
        found = {}
        for pid, cmdline in children_of(self.process.pid).items():
            for role, marker in roles.items():
                if marker in cmdline:
                    found[role] = pid
        return found


@contextmanager
def serve(var_dir: Path, urls: dict[str, str]) -> Iterator[RunningServe]:
    """Start ``manage.py serve`` and wait until the admin login page answers 200."""
    port = free_port()
    env = clean_env(var_dir, ONEVALET_WORKER_CONCURRENCY="2", **urls)
    log = var_dir / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [PYTHON, "manage.py", "serve", "--port", str(port)],
            cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )
    running = RunningServe(process, port, env, log)
    groups: set[int] = set()
    try:
        wait_for(lambda: process.poll() is not None or running.status("/admin/login/") == 200,
                 START_TIMEOUT, "the admin login page", detail=lambda: running.output()[-4000:])
        assert process.poll() is None, running.output()
        groups = set(running.children().values())
        yield running
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for pgid in groups:  # never leak processes into the rest of the suite
            for pid in process_group_members(pgid):
                os.kill(pid, signal.SIGKILL)


def worker_answers(env: dict[str, str], node: str) -> bool:
    result = subprocess.run(
        [PYTHON, "-m", "celery", "-A", "onevalet_site", "inspect", "ping", "-d", node, "--timeout", "3"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )
    return result.returncode == 0 and "pong" in result.stdout


def test_serve_runs_every_process_and_ctrl_c_stops_them_all(var_dir: Path, serve_urls: dict[str, str]) -> None:
    with serve(var_dir, serve_urls) as running:
        children = running.children()
        expected = {"daphne", "worker", "beat"} | ({"redis"} if "REDIS_URL" not in serve_urls else set())
        assert expected <= children.keys(), running.output()
        assert running.status("/static/admin/css/base.css") == 200  # whitenoise, through daphne
        node = f"onevalet-{running.process.pid}@{socket.gethostname()}"
        wait_for(lambda: worker_answers(running.env, node), 120, f"celery worker {node} to answer ping",
                 detail=lambda: running.output()[-4000:])
        assert running.process.poll() is None and running.children().keys() == children.keys()
        groups = {role: process_group_members(pid) for role, pid in children.items()}
        assert len(groups["worker"]) >= 3, groups  # the worker and its two prefork children

        running.process.send_signal(signal.SIGINT)
        assert running.process.wait(timeout=90) == 0, running.output()

        leftovers = {role: process_group_members(pgid) for role, pgid in children.items()}
        assert not any(leftovers.values()), leftovers
        output = running.output()
        assert "Created the admin account" in output
        assert f"http://localhost:{running.port}/chat/" in output
        assert f"http://localhost:{running.port}/api/v1/docs" in output


def test_serve_stops_everything_when_a_child_dies(var_dir: Path, serve_urls: dict[str, str]) -> None:
    with serve(var_dir, serve_urls) as running:
        children = running.children()
        os.kill(children["beat"], signal.SIGKILL)
        assert running.process.wait(timeout=90) != 0
        assert "OneValet stopped: celery-beat exited" in running.output()
        leftovers = {role: process_group_members(pgid) for role, pgid in children.items()}
        assert not any(leftovers.values()), leftovers


@pytest.mark.django_db
@pytest.mark.smoke
def test_admin_account_is_created_once_with_a_password_shown_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.contrib.auth import authenticate

    from onevalet_site.supervisor import ensure_admin

    monkeypatch.setenv("ONEVALET_ADMIN_USER", "boss")
    first, second = io.StringIO(), io.StringIO()
    ensure_admin(first)
    ensure_admin(second)
    password = first.getvalue().split("password '", 1)[1].split("'", 1)[0]
    assert authenticate(username="boss", password=password) is not None
    assert password not in second.getvalue()
    assert "exists" in second.getvalue() and "manage.py changepassword boss" in second.getvalue()
