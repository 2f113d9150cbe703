"""Helpers for the foundation tests: manage.py run as a real subprocess in a clean env.

Start-up behaviour (configuration errors, ``serve``) can only be observed from outside the
process, so these tests spawn ``manage.py`` with an environment built here rather than
touching the settings of the pytest process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

#: Variables a test decides itself; inherited values (a developer's shell, CI) are dropped.
CONTROLLED = (
    "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS",
    "CREDENTIALS_KEYS", "ONEVALET_LOOP", "ONEVALET_VAR_DIR", "ONEVALET_HOST", "ONEVALET_PORT",
    "ONEVALET_ADMIN_USER", "DJANGO_SETTINGS_MODULE",
)


def clean_env(var_dir: Path, **overrides: str) -> dict[str, str]:
    """The current environment without OneValet's own variables (nor their ``_FILE`` forms),
    pointed at ``var_dir``, plus ``overrides``."""
    env = {
        key: value for key, value in os.environ.items()
        if key not in CONTROLLED and not (key.endswith("_FILE") and key[: -len("_FILE")] in CONTROLLED)
    }
    env["ONEVALET_VAR_DIR"] = str(var_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def run_manage(*args: str, env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )


def free_port() -> int:
    """A TCP port nothing listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(predicate: Callable[[], bool], timeout: float, what: str,
             detail: Callable[[], str] = lambda: "") -> None:
    """Poll ``predicate`` with a growing delay until it holds; fail after ``timeout`` seconds,
    adding ``detail()`` (e.g. the tail of a server log) to the failure message."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{detail()}")
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)


def process_group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes in process group ``pgid``, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def children_of(pid: int) -> dict[int, str]:
    """The direct children of ``pid``: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = cmdline
    return found
