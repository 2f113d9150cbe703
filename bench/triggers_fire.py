"""Trigger firing benchmark: N one-time tasks due at the same instant, real beat and workers.

What it measures: how long the real pipeline — ``celery beat`` (DatabaseScheduler) sending
every due ``PeriodicTask``, ``celery worker`` processes claiming each firing, running the
assistant loop against a zero-latency scripted LLM, recording the run and notifying the
user — takes to fire them all, and whether every firing happened exactly once:

* duplicates: extra runs or extra notifications for one task (must be 0);
* misses: tasks whose firing never completed (must be 0).

    .venv/bin/python bench/triggers_fire.py               # 1,000 tasks, 2 worker processes
    .venv/bin/python bench/triggers_fire.py -n 200        # smaller
    .venv/bin/python bench/triggers_fire.py --via broker  # skip beat: publish fire_trigger as beat would

The database and broker follow the environment, like the server: with DATABASE_URL set to
Postgres a throw-away database is created on that server (and dropped); without it a
SQLite file in a fresh temporary var dir. REDIS_URL is used as given (its default queue is
purged first: use a Redis database of your own); without it the embedded Redis runs in the
temporary var dir. Everything is on loopback; every process started here is stopped and
every file or database created here is removed, also on Ctrl-C or a timeout.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@dataclass
class Figures:
    """The results of one run, printed as a table."""

    n: int
    backend: str
    broker: str
    via: str
    workers: str
    setup_seconds: float
    fire_seconds: float | None
    first_done_seconds: float | None
    completed: int
    failed: int
    duplicates: int
    duplicate_notifications: int
    misses: int
    beat_sends: int | None
    worker_outcomes: dict[str, int]

    def rows(self) -> list[tuple[str, str]]:
        def seconds(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f} s"

        rate = f"{self.completed / self.fire_seconds:.1f} firings/s" if self.fire_seconds else "-"
        outcomes = ", ".join(f"{key} {value}" for key, value in sorted(self.worker_outcomes.items())) or "-"
        return [
            ("tasks due at the same instant", str(self.n)),
            ("database / broker", f"{self.backend} / {self.broker}"),
            ("fired via", self.via),
            ("worker processes", self.workers),
            ("setup (migrate + create tasks)", seconds(self.setup_seconds)),
            ("due -> first firing completed", seconds(self.first_done_seconds)),
            ("due -> all fired (last run completed)", seconds(self.fire_seconds)),
            ("throughput", rate),
            ("runs completed", str(self.completed)),
            ("runs failed", str(self.failed)),
            ("duplicates (extra runs)", str(self.duplicates)),
            ("duplicates (extra notifications)", str(self.duplicate_notifications)),
            ("misses (no completed run)", str(self.misses)),
            ("messages beat sent", "-" if self.beat_sends is None else str(self.beat_sends)),
            ("worker outcomes (fire_trigger)", outcomes),
        ]


def print_table(figures: Figures) -> None:
    rows = figures.rows()
    width = max(len(name) for name, _ in rows)
    line = "-" * (width + 2) + "+" + "-" * (max(len(value) for _, value in rows) + 2)
    print(line)
    for name, value in rows:
        print(f" {name:<{width}} | {value}")
    print(line)


# --------------------------------------------------------------------------- environment


@contextmanager
def bench_environment(stack: ExitStack) -> Iterator[tuple[str, str]]:
    """Set DATABASE_URL / ONEVALET_VAR_DIR for a private database before Django starts.

    Yields (database kind, broker kind). The temporary var dir is short on purpose: the
    embedded Redis's unix socket path must stay under 108 bytes.
    """
    var_dir = Path(tempfile.mkdtemp(prefix="ovfire-"))
    stack.callback(shutil.rmtree, var_dir, ignore_errors=True)
    os.environ["ONEVALET_VAR_DIR"] = str(var_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "onevalet_site.settings")
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        import psycopg

        parsed = urlparse(database_url)
        name = f"{parsed.path.lstrip('/') or 'onevalet'}_firebench_{secrets.token_hex(3)}"
        admin_url = urlunparse(parsed._replace(path="/postgres"))
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

        def drop() -> None:
            from django.db import connections

            connections.close_all()
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

        stack.callback(drop)
        os.environ["DATABASE_URL"] = urlunparse(parsed._replace(path=f"/{name}"))
        kind = "PostgreSQL"
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'bench.db'}"
        kind = "SQLite file"
    yield kind, ("Redis " + os.environ["REDIS_URL"]) if os.environ.get("REDIS_URL") else "embedded Redis"


class Processes:
    """Children in process groups of their own; ``stop`` ends every group (SIGTERM, then SIGKILL)."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.children: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str], *, stdout: int | None = None) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child holds it
        try:
            child = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=stdout if stdout is not None else log, stderr=log,
                                     start_new_session=True)
        finally:
            log.close()
        self.children[name] = child
        return child

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def check_alive(self) -> None:
        for name, child in self.children.items():
            if child.poll() is not None:
                raise RuntimeError(f"{name} exited with {child.returncode}:\n{self.log(name)[-3000:]}")

    def stop(self) -> None:
        from onevalet_site.supervisor import group_alive

        for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            live = [child for child in self.children.values() if group_alive(child.pid)]
            for child in live:
                try:
                    os.killpg(child.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while any(group_alive(child.pid) for child in live) and time.monotonic() < deadline:
                time.sleep(0.05)
        for child in self.children.values():
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def wait_for(probe: Callable[[], bool], *, timeout: float, what: str, processes: Processes) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        processes.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


# --------------------------------------------------------------------------- the run


def run(args: argparse.Namespace, stack: ExitStack) -> Figures:
    with bench_environment(stack) as (backend, broker):
        import django

        django.setup()
        return measure(args, stack, backend, broker)


def measure(args: argparse.Namespace, stack: ExitStack, backend: str, broker: str) -> Figures:
    from django.conf import settings
    from django.core.management import call_command
    from django.db.models import Count, Max, Min
    from django.utils import timezone

    from notifications.models import Notification
    from onevalet_site import embedded_redis
    from onevalet_site.celery import app
    from tests.factories import make_user
    from triggers import services
    from triggers.models import TriggerRun, TriggerTask
    from triggers.tasks import fire_trigger

    var_dir = Path(settings.VAR_DIR)
    if settings.EMBEDDED_REDIS:
        embedded_redis.ensure_for_settings()
        stack.callback(embedded_redis.stop, var_dir)
    else:
        app.control.purge()  # messages of earlier runs would hit this run's fresh database
    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)

    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST")}
    env.update({"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "WARNING"})
    log_dir = Path(args.log_dir).resolve() if args.log_dir else var_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    processes = Processes(env, log_dir)
    stack.callback(processes.stop)

    llm = processes.start("llm", [sys.executable, str(ROOT / "bench" / "llm_server_proc.py")],
                          stdout=subprocess.PIPE)
    port = llm.stdout.readline().decode().strip() if llm.stdout else ""
    if not port.isdigit():
        raise RuntimeError(f"the scripted LLM server did not start:\n{processes.log('llm')}")
    env.update({"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "bench",
                "ONEVALET_MODEL": "scripted-model"})

    user = make_user(display_name="Bench")
    lead = timedelta(seconds=args.lead if args.lead is not None else 10 + args.n * 0.02)
    due = timezone.now().replace(microsecond=0) + lead
    for index in range(args.n):
        services.trigger_task_create(owner_id=user.pk, name=f"bench {index}", kind="one_time", run_at=due,
                                     action={"instruction": f"Bench reminder {index}"})
    setup_seconds = time.monotonic() - started

    celery = [sys.executable, "-m", "celery", "-A", "onevalet_site"]
    for index in range(args.workers):
        processes.start(f"worker{index + 1}", [*celery, "worker", "--pool", "prefork", "--concurrency",
                                               str(args.concurrency), "--loglevel", "INFO", "-Q",
                                               app.conf.task_default_queue, "--hostname",
                                               f"bench{index + 1}-{secrets.token_hex(3)}@%h", "--without-gossip",
                                               "--without-mingle", "--without-heartbeat"])
    for index in range(args.workers):
        wait_for(lambda i=index: " ready." in processes.log(f"worker{i + 1}"), timeout=120,
                 what=f"worker {index + 1} to start", processes=processes)
    if args.via == "beat":
        processes.start("beat", [*celery, "beat", "--loglevel", "INFO", "-S",
                                 "django_celery_beat.schedulers:DatabaseScheduler"])
    else:
        while timezone.now() < due:
            time.sleep(0.05)
        for task_id in TriggerTask.objects.values_list("pk", flat=True):
            fire_trigger.apply_async(kwargs={"task_id": task_id})  # what beat sends; publish stamps fired_at

    runs = TriggerRun.objects.filter(task__owner=user)

    def finished() -> bool:
        return runs.exclude(status=TriggerRun.Status.RUNNING).count() >= args.n

    timed_out = False
    try:
        wait_for(finished, timeout=args.timeout + max(0.0, (due - timezone.now()).total_seconds()),
                 what=f"{args.n} firings", processes=processes)
    except TimeoutError as exc:
        timed_out = True
        print(f"warning: {exc}; reporting what fired so far", file=sys.stderr)
    # Let stragglers (a re-sent message, a retry) arrive before counting duplicates.
    settle_until = time.monotonic() + args.settle
    while time.monotonic() < settle_until:
        time.sleep(0.2)

    def since_due(moment: datetime | None) -> float | None:
        return None if moment is None else (moment - due).total_seconds()

    done = runs.filter(status=TriggerRun.Status.COMPLETED)
    bounds = done.aggregate(first=Min("finished_at"), last=Max("finished_at"))
    per_task = runs.values("task").annotate(n=Count("id"))
    notes = Notification.objects.filter(owner=user).values("data__trigger").annotate(n=Count("id"))
    completed_tasks = set(done.values_list("task", flat=True))
    outcomes: dict[str, int] = {}
    for index in range(args.workers):
        for outcome in ("done", "duplicate", "busy", "inactive"):
            hits = processes.log(f"worker{index + 1}").count(f": '{outcome}'")
            if hits:
                outcomes[outcome] = outcomes.get(outcome, 0) + hits
        retries = processes.log(f"worker{index + 1}").count("retry: Retry in")
        if retries:
            outcomes["retried (busy)"] = outcomes.get("retried (busy)", 0) + retries
    errors = runs.filter(status=TriggerRun.Status.FAILED).values("error").annotate(n=Count("id")).order_by("-n")
    for row in errors[:3]:
        print(f"failed runs ({row['n']}): {row['error'][:300]}", file=sys.stderr)
    return Figures(
        n=args.n, backend=backend, broker=broker, via=args.via,
        workers=f"{args.workers} x celery worker --concurrency {args.concurrency}",
        setup_seconds=setup_seconds,
        fire_seconds=None if timed_out else since_due(bounds["last"]),
        first_done_seconds=since_due(bounds["first"]),
        completed=done.count(), failed=runs.filter(status=TriggerRun.Status.FAILED).count(),
        duplicates=sum(row["n"] - 1 for row in per_task if row["n"] > 1),
        duplicate_notifications=sum(row["n"] - 1 for row in notes if row["n"] > 1),
        misses=TriggerTask.objects.filter(owner=user).exclude(pk__in=completed_tasks).count(),
        beat_sends=processes.log("beat").count("Sending due task trigger:") if args.via == "beat" else None,
        worker_outcomes=outcomes,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=1000, help="tasks due at the same instant (default 1000)")
    parser.add_argument("--workers", type=int, default=2, help="celery worker processes (default 2)")
    parser.add_argument("--concurrency", type=int, default=1, help="prefork children per worker (default 1)")
    parser.add_argument("--via", choices=("beat", "broker"), default="beat",
                        help="beat fires the PeriodicTasks (default) or this script publishes fire_trigger")
    parser.add_argument("--lead", type=float, default=None,
                        help="seconds from the start of task creation to the due time (default 10 + n/50)")
    parser.add_argument("--timeout", type=float, default=900, help="bound on the firing phase, seconds")
    parser.add_argument("--settle", type=float, default=5, help="seconds to wait for stragglers before counting")
    parser.add_argument("--log-dir", default=None,
                        help="keep the processes' logs here (default: the temporary var dir, removed at exit)")
    args = parser.parse_args()
    with ExitStack() as stack:
        try:
            figures = run(args, stack)
        except KeyboardInterrupt:
            print("interrupted; cleaning up", file=sys.stderr)
            return 130
    print_table(figures)
    ok = figures.duplicates == 0 and figures.duplicate_notifications == 0 and figures.misses == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
