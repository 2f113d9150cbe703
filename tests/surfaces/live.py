"""A real daphne server in a subprocess, for tests and the websocket benchmark.

The server gets its own file SQLite database (migrated once) and its own Redis key prefix,
so it shares nothing with pytest's test database but the Redis server; tests talk to it
only over HTTP and websockets, as clients do.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]

CREATE_USERS = """
import json, sys
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
out = {}
for name in sys.argv[1:]:
    user = get_user_model().objects.create_user(username=name, password="pw-" + name, is_staff=True)
    out[name] = Token.objects.create(user=user).key
print(json.dumps(out))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LiveServer:
    """A running daphne: ``url``/``ws_url``, its pid, and ``create_users`` over its DB."""

    workdir: Path
    env: dict[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/chat/"

    def manage(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, input=stdin,
                              capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def create_users(self, *names: str) -> dict[str, str]:
        """Users (password ``pw-<name>``, staff) with DRF tokens: ``{name: token}``."""
        script = f"import sys; sys.argv = ['x', {', '.join(repr(n) for n in names)}]\n" + CREATE_USERS
        return json.loads(self.manage("shell", "-c", script).strip().splitlines()[-1])

    def start(self, timeout: float = 30) -> LiveServer:
        self.manage("migrate", "--noinput")
        log = open(self.workdir / "daphne.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "onevalet_site.asgi:application"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline, delay = time.monotonic() + timeout, 0.02
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited with {self.process.returncode}; see {self.workdir}/daphne.log")
            try:
                urllib.request.urlopen(self.url + "/accounts/login/", timeout=1).read()
                return self
            except OSError:
                time.sleep(delay)  # polling a starting process: there is no event to await
                delay = min(delay * 2, 0.25)
        raise RuntimeError(f"daphne did not answer within {timeout}s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def rss_kib(self) -> int:
        """Resident memory of the daphne process (Linux ``/proc``)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")


def live_server_env(workdir: Path, llm_env: dict[str, str], **extra: str) -> dict[str, str]:
    """The daphne subprocess's environment: own DB and Redis prefix, the scripted LLM."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.update(llm_env)
    env.update({
        "DJANGO_SETTINGS_MODULE": "onevalet_site.settings",
        "ONEVALET_VAR_DIR": str(settings.VAR_DIR),
        "DATABASE_URL": f"sqlite:///{workdir / 'live.db'}",
        "ONEVALET_REDIS_PREFIX": f"onevalet-live-{uuid.uuid4().hex[:8]}",
        "ONEVALET_TOOL_MODULES": "orchestrator.builtin_tools,tests.surfaces.tools",
        "ONEVALET_API_RATE": "100000/minute",
        "ONEVALET_MESSAGE_RATE": "100000/minute",
        "LOG_LEVEL": "WARNING",
        # Every token delta is its own event here, so the stalled-reader test really has
        # hundreds of events to miss and replay (coalescing is tested in-process).
        "ONEVALET_CHUNK_WINDOW_MS": "0",
        "PYTHONPATH": str(ROOT),
    })
    if not settings.EMBEDDED_REDIS:
        env["REDIS_URL"] = settings.REDIS_URL
    env.update(extra)
    return env
