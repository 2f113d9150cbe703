"""``manage.py serve``: check the configuration, prepare the database, run every process.

One command starts the whole server so that a newcomer needs nothing but ``make run``:
the web/websocket server (daphne), a Celery worker, Celery beat and, when ``REDIS_URL`` is
unset, the embedded Redis they all talk to. In production the same processes are usually
run by a real service manager instead (see the README); this module is the small one that
makes the single-machine default behave like one program:

* preflight: the database (and an external Redis) must answer before anything starts, and
  a failure is one line naming the variable to fix, exit status 2;
* preparation: migrations, static files, an admin account;
* supervision: each child runs in its own process group, so stopping it also stops its
  grandchildren (Celery's prefork pool); if one child dies the others are stopped and the
  command exits non-zero naming it; Ctrl-C or SIGTERM stops them all cleanly.

The children are a declarative table, :data:`PROCESSES`: adding a process is adding a row.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from onevalet_site import embedded_redis
from onevalet_site.env import ConfigError, env_int, env_str, redact_url

#: How long a child gets between SIGTERM and SIGKILL. Celery's warm shutdown waits for
#: running tasks, so this bounds how long a stuck task can hold up a stop.
STOP_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True)
class ServeOptions:
    """Everything the process table needs to build command lines."""

    host: str
    port: int
    var_dir: Path
    run_embedded_redis: bool
    worker_concurrency: int
    worker_name: str
    python: str = sys.executable


@dataclass(frozen=True)
class ProcessSpec:
    """One supervised child: its name (used in messages) and how to build its argv.

    ``before`` runs in the supervisor just before the row starts (beat's missed-run pass).
    ``enabled`` decides per start whether the row runs at all; ``ready`` is a probe awaited
    before the next row starts, for rows the later ones depend on (the embedded Redis).
    Rows with a probe are also stopped last.
    """

    name: str
    argv: Callable[[ServeOptions], list[str]]
    enabled: Callable[[ServeOptions], bool] = lambda options: True
    ready: Callable[[ServeOptions], bool] | None = None
    before: Callable[[ServeOptions], None] | None = None


def _celery(options: ServeOptions, *args: str) -> list[str]:
    return [options.python, "-m", "celery", "-A", "onevalet_site", *args]


PROCESSES: list[ProcessSpec] = [
    ProcessSpec(
        "embedded-redis",
        lambda o: embedded_redis.server_command(o.var_dir, daemonize=False),
        enabled=lambda o: o.run_embedded_redis,
        ready=lambda o: embedded_redis.is_answering(embedded_redis.socket_path(o.var_dir)),
    ),
    ProcessSpec(
        "daphne",
        lambda o: [o.python, "-m", "daphne", "-b", o.host, "-p", str(o.port), "onevalet_site.asgi:application"],
    ),
    ProcessSpec(
        "celery-worker",
        lambda o: _celery(
            o, "worker", "--loglevel", "INFO", "--pool", "prefork",
            "--concurrency", str(o.worker_concurrency), "--hostname", o.worker_name,
        ),
    ),
    ProcessSpec(
        "event-consumer",
        lambda o: [o.python, "manage.py", "run_event_consumer"],
    ),
    ProcessSpec(
        "celery-beat",
        lambda o: _celery(o, "beat", "--loglevel", "INFO", "-S", "django_celery_beat.schedulers:DatabaseScheduler"),
        # Firings missed while OneValet was down get their policy (run once / skip / ask)
        # before beat starts; otherwise beat would fire overdue slots on its own.
        before=lambda o: _catch_up_triggers(),
    ),
]


def _catch_up_triggers() -> None:
    from django.core.management import call_command

    call_command("catch_up_triggers", verbosity=1)


# --- Preflight ---------------------------------------------------------------------------


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()


def check_database() -> None:
    """Connect once; a refused or failing connection is a ConfigError naming DATABASE_URL."""
    from django.conf import settings
    from django.db import connections

    # libpq otherwise waits forever on a host that drops packets; children inherit it too.
    os.environ.setdefault("PGCONNECT_TIMEOUT", "5")
    connection = connections["default"]
    try:
        connection.ensure_connection()
    except Exception as exc:  # each backend raises its own OperationalError flavour
        raise ConfigError(
            "DATABASE_URL", f"cannot connect to {redact_url(settings.DATABASE_URL)} ({_first_line(exc)})"
        ) from None
    finally:
        connection.close()


def check_redis(url: str, timeout: float = 2.0) -> None:
    """PING an external Redis with a short timeout; failure names REDIS_URL."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        raise ConfigError("REDIS_URL", f"no Redis answers at {redact_url(url)} ({_first_line(exc)})") from None
    finally:
        client.close()


def check_port_free(host: str, port: int) -> None:
    """Fail before starting anything when the web port is taken, rather than after daphne dies."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                "ONEVALET_PORT", f"cannot listen on {host}:{port} ({exc.strerror}); pick another with --port"
            ) from None


def llm_notice() -> str | None:
    """Plain instructions when no LLM key is set: the server still starts without one."""
    from django.conf import settings

    if settings.OPENAI_API_KEY:
        return None
    return (
        "No LLM is configured yet: the server starts, but the assistant cannot answer until you set\n"
        "  OPENAI_API_KEY=...       the API key of any OpenAI-compatible endpoint\n"
        "                           (servers that need none accept any value, e.g. 'local')\n"
        "  OPENAI_BASE_URL=...      optional: the endpoint, e.g. http://127.0.0.1:11434/v1 for Ollama\n"
        f"  ONEVALET_MODEL=...       optional: the model name (now {settings.ONEVALET_MODEL!r})\n"
        "and start again."
    )


def preflight(out: TextIO) -> None:
    from django.conf import settings

    check_database()
    if not settings.EMBEDDED_REDIS:
        check_redis(settings.REDIS_URL)
    notice = llm_notice()
    if notice:
        out.write(notice + "\n")


# --- Preparation -------------------------------------------------------------------------


def prepare(out: TextIO) -> None:
    """Bring the database and static files up to date; make sure someone can log in."""
    from django.core.management import call_command

    out.write("Applying database migrations…\n")
    call_command("migrate", interactive=False, verbosity=0)
    out.write("Collecting static files…\n")
    call_command("collectstatic", interactive=False, verbosity=0)
    ensure_admin(out)


def ensure_admin(out: TextIO) -> None:
    """Create the admin superuser on the first start with a random password shown once.

    The password is printed, never stored anywhere but as Django's hash, so the repository
    and the var dir hold no credential; a forgotten one is reset with ``changepassword``.
    """
    from django.contrib.auth import get_user_model

    username = env_str("ONEVALET_ADMIN_USER", "admin")
    user_model = get_user_model()
    reset = f"python manage.py changepassword {username}"
    if user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).exists():
        out.write(f"Admin account {username!r} exists (forgot its password? {reset}).\n")
        return
    password = secrets.token_urlsafe(12)
    user_model.objects.create_superuser(username=username, email="", password=password)
    out.write(
        "\n"
        f"Created the admin account. Log in with user {username!r} and password {password!r}\n"
        f"This password is shown only now; change it any time with: {reset}\n\n"
    )


# --- Supervision -------------------------------------------------------------------------


@dataclass
class Child:
    """A running row of the table."""

    spec: ProcessSpec
    process: subprocess.Popen[bytes]

    @property
    def name(self) -> str:
        return self.spec.name


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process remains in the process group ``pgid``.

    Zombies are skipped: orphaned grandchildren are reaped by init, not by us, and a zombie
    no longer runs anything.
    """
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except OSError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@dataclass
class Supervisor:
    """Starts the table's rows as children and stops them all, however the run ends.

    Signal handlers only set flags; waiting is done with ``select`` on the wakeup fd, which
    SIGCHLD, SIGINT and SIGTERM all write to, so nothing is interrupted half-way and no
    polling interval delays a reaction.
    """

    options: ServeOptions
    out: TextIO = sys.stdout
    stop_timeout: float = STOP_TIMEOUT_SECONDS
    children: list[Child] = field(default_factory=list)
    stop_signal: int | None = None
    _wakeup_r: int = -1
    _wakeup_w: int = -1
    _saved_handlers: dict[int, object] = field(default_factory=dict)
    _saved_wakeup: int = -1

    def __enter__(self) -> "Supervisor":
        self._wakeup_r, self._wakeup_w = os.pipe()
        os.set_blocking(self._wakeup_r, False)
        os.set_blocking(self._wakeup_w, False)
        self._saved_wakeup = signal.set_wakeup_fd(self._wakeup_w)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            self._saved_handlers[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.stop_all()
        finally:
            for signum, handler in self._saved_handlers.items():
                signal.signal(signum, handler)  # type: ignore[arg-type]
            signal.set_wakeup_fd(self._saved_wakeup)
            os.close(self._wakeup_r)
            os.close(self._wakeup_w)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum != signal.SIGCHLD and self.stop_signal is None:
            self.stop_signal = signum

    def _sleep_until_signal(self, timeout: float | None) -> None:
        """Block until a signal arrives (or ``timeout``), then drain the wakeup pipe."""
        select.select([self._wakeup_r], [], [], timeout)
        try:
            while os.read(self._wakeup_r, 512):
                pass
        except BlockingIOError:
            pass

    def exited_child(self) -> Child | None:
        return next((child for child in self.children if child.process.poll() is not None), None)

    def start(self, specs: list[ProcessSpec], *, ready_timeout: float = 30.0) -> Child | None:
        """Start each enabled row in order; returns a child that died while starting, if any."""
        env = {**os.environ, "ONEVALET_VAR_DIR": str(self.options.var_dir),
               "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "onevalet_site.settings")}
        cwd = Path(__file__).resolve().parent.parent
        for spec in specs:
            if self.stop_signal is not None:
                return None
            if not spec.enabled(self.options):
                continue
            if spec.before is not None:
                spec.before(self.options)
            process = subprocess.Popen(spec.argv(self.options), env=env, cwd=cwd, start_new_session=True)
            self.children.append(Child(spec, process))
            if spec.ready is not None and not self.wait_until(lambda: spec.ready(self.options), ready_timeout):
                if self.stop_signal is not None:
                    return None
                return self.exited_child() or self.children[-1]
        return self.exited_child()

    def wait_until(self, probe: Callable[[], bool], timeout: float) -> bool:
        """Poll ``probe`` with a growing delay until it holds, a child dies, a stop is asked
        for, or ``timeout`` passes; True only when the probe held."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        while time.monotonic() < deadline:
            if probe():
                return True
            if self.stop_signal is not None or self.exited_child() is not None:
                return False
            self._sleep_until_signal(delay)
            delay = min(delay * 2, 0.25)
        return probe()

    def wait(self) -> Child | None:
        """Block until a child exits (returned) or a stop signal arrives (None)."""
        while True:
            if self.stop_signal is not None:
                return None
            child = self.exited_child()
            if child is not None:
                return child
            self._sleep_until_signal(None)

    def stop_all(self) -> None:
        """Stop every child: first the rows nothing depends on, then those with a ``ready``
        probe (the embedded Redis), so no process loses its broker while shutting down."""
        dependents = [child for child in reversed(self.children) if child.spec.ready is None]
        dependencies = [child for child in reversed(self.children) if child.spec.ready is not None]
        for phase in (dependents, dependencies):
            self._stop_phase(phase)
        self.children.clear()

    def _stop_phase(self, children: list[Child]) -> None:
        """SIGTERM each leader, wait up to ``stop_timeout``, then SIGKILL whatever is left of
        each process group, grandchildren included."""
        for child in children:
            if child.process.poll() is None:
                try:
                    child.process.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + self.stop_timeout
        for child in children:
            try:
                child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.out.write(f"{child.name} did not stop within {self.stop_timeout:.0f}s; killing it.\n")
        for child in children:
            pgid = child.process.pid
            grace = time.monotonic() + 2.0
            while group_alive(pgid) and time.monotonic() < grace:
                time.sleep(0.05)  # orphans of the group: no SIGCHLD reaches us for them
            if group_alive(pgid):
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if child.process.poll() is None:
                child.process.wait()
            # SIGKILL is delivered asynchronously; orphans are not ours to wait() for, so
            # watch the group until the kernel has taken every member down.
            gone = time.monotonic() + 5.0
            while group_alive(pgid) and time.monotonic() < gone:
                time.sleep(0.02)


# --- The command -------------------------------------------------------------------------


def build_options(host: str | None, port: int | None, out: TextIO) -> ServeOptions:
    """Resolve options from the command line, then the environment, then defaults."""
    from django.conf import settings

    var_dir = Path(settings.VAR_DIR)
    run_redis = bool(settings.EMBEDDED_REDIS)
    if run_redis and embedded_redis.is_answering(embedded_redis.socket_path(var_dir)):
        out.write(f"Reusing the embedded Redis already answering on {embedded_redis.socket_path(var_dir)}.\n")
        run_redis = False
    return ServeOptions(
        host=host or env_str("ONEVALET_HOST", "127.0.0.1"),
        port=port if port is not None else env_int("ONEVALET_PORT", 8000, minimum=1),
        var_dir=var_dir,
        run_embedded_redis=run_redis,
        worker_concurrency=env_int("ONEVALET_WORKER_CONCURRENCY", 2, minimum=1),
        worker_name=f"onevalet-{os.getpid()}@{socket.gethostname()}",
    )


def _urls(options: ServeOptions) -> str:
    shown = "localhost" if options.host in {"127.0.0.1", "0.0.0.0", "::", "::1"} else options.host
    base = f"http://{shown}:{options.port}"
    return (
        f"OneValet is running (Ctrl-C stops it):\n"
        f"  chat      {base}/chat/\n"
        f"  admin     {base}/admin/\n"
        f"  API docs  {base}/api/v1/docs\n"
    )


def _port_answers(host: str, port: int) -> bool:
    address = "127.0.0.1" if host in {"0.0.0.0", ""} else ("::1" if host == "::" else host)
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def run(host: str | None, port: int | None, out: TextIO, err: TextIO) -> int:
    """The whole of ``manage.py serve``; returns the exit status.

    ConfigError escapes to ``manage.py``, which prints it as one line and exits 2.
    """
    preflight(out)
    options = build_options(host, port, out)
    check_port_free(options.host, options.port)
    prepare(out)
    with Supervisor(options, out=out) as supervisor:
        died = supervisor.start(PROCESSES)
        if died is None and supervisor.stop_signal is None:
            if supervisor.wait_until(lambda: _port_answers(options.host, options.port), 60.0):
                out.write(_urls(options))
                out.flush()
            died = supervisor.wait()
        if died is None:
            out.write("Stopping OneValet…\n")
            out.flush()
            return 0
        code = died.process.poll()
        reason = f"exited with status {code}" if code is not None else "did not become ready"
        err.write(f"OneValet stopped: {died.name} {reason}; stopping the other processes.\n")
        err.flush()
        return 1
