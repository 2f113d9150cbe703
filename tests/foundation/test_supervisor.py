"""The supervisor on its own, with stand-in children: fast, no Django processes.

The stand-ins reproduce what matters about the real rows: a child that forks a grandchild
into its own process group (Celery's prefork pool), a child that ignores SIGTERM, a child
that dies.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from onevalet_site.supervisor import ProcessSpec, ServeOptions, Supervisor
from tests.foundation.helpers import process_group_members

pytestmark = pytest.mark.smoke

# A parent that starts a grandchild in its process group, then idles until signalled.
FORKS_A_GRANDCHILD = (
    "import subprocess, sys, signal\n"
    "subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
    "signal.pause()\n"
)
IGNORES_SIGTERM = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); open(READY, 'w').close(); signal.pause()"


def _options(tmp_path: Path) -> ServeOptions:
    return ServeOptions(host="127.0.0.1", port=0, var_dir=tmp_path, run_embedded_redis=False,
                        worker_concurrency=1, worker_name="test@host")


def _spec(name: str, code: str, ready_file: Path | None = None) -> ProcessSpec:
    if ready_file is not None:
        code = f"READY = {str(ready_file)!r}\n" + code
    return ProcessSpec(name, lambda o: [sys.executable, "-c", code])


def test_stop_leaves_no_child_nor_grandchild(tmp_path: Path) -> None:
    forker_ready, stubborn_ready = tmp_path / "forker", tmp_path / "stubborn"
    code = FORKS_A_GRANDCHILD.replace("signal.pause()\n", "open(READY, 'w').close(); signal.pause()\n", 1)
    rows = [_spec("forker", code, forker_ready), _spec("stubborn", IGNORES_SIGTERM, stubborn_ready)]
    out = io.StringIO()
    with Supervisor(_options(tmp_path), out=out, stop_timeout=3) as supervisor:
        assert supervisor.start(rows) is None
        assert supervisor.wait_until(lambda: forker_ready.exists() and stubborn_ready.exists(), 20)
        groups = [child.process.pid for child in supervisor.children]
        assert len(process_group_members(groups[0])) == 2  # the child and its grandchild
    assert all(process_group_members(pgid) == [] for pgid in groups)
    assert "stubborn did not stop" in out.getvalue()


def test_a_dying_child_is_reported_and_the_others_stopped(tmp_path: Path) -> None:
    rows = [_spec("sleeper", "import signal; signal.pause()"), _spec("crasher", "raise SystemExit(3)")]
    with Supervisor(_options(tmp_path), out=io.StringIO(), stop_timeout=5) as supervisor:
        supervisor.start(rows)
        died = supervisor.wait()
        assert died is not None and died.name == "crasher"
        assert died.process.returncode == 3
        sleeper = supervisor.children[0].process
    assert sleeper.returncode is not None


def test_disabled_rows_do_not_start(tmp_path: Path) -> None:
    row = ProcessSpec("never", lambda o: [sys.executable, "-c", "pass"], enabled=lambda o: False)
    with Supervisor(_options(tmp_path), out=io.StringIO()) as supervisor:
        supervisor.start([row])
        assert supervisor.children == []
