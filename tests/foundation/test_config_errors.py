"""Bad configuration stops start-up with one line naming the variable, exit status 2.

Each case runs ``manage.py`` as a subprocess because the behaviour under test is what a
person sees in the terminal: no traceback, one sentence, the variable to fix.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from tests.foundation.helpers import REPO, clean_env, free_port, run_manage

pytestmark = pytest.mark.smoke

CASES = [
    pytest.param({"DATABASE_URL": "definitely not a url"}, ["check"], "DATABASE_URL", id="malformed-database-url"),
    pytest.param({"DATABASE_URL": "mysql://u@127.0.0.1/db"}, ["check"], "DATABASE_URL", id="unsupported-database"),
    pytest.param({"DEBUG": "false"}, ["check"], "SECRET_KEY", id="debug-off-without-secret-key"),
    pytest.param({"DEBUG": "maybe"}, ["check"], "DEBUG", id="malformed-debug"),
    pytest.param({"ONEVALET_LOOP": "{max_turns: 3"}, ["check"], "ONEVALET_LOOP", id="malformed-loop-json"),
    pytest.param({"ONEVALET_LOOP": "[3]"}, ["check"], "ONEVALET_LOOP", id="loop-json-not-an-object"),
    pytest.param({"REDIS_URL": "http://127.0.0.1:6379"}, ["check"], "REDIS_URL", id="malformed-redis-url"),
]


def _assert_one_line_naming(result, variable: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert re.search(rf"\b{variable}\b", lines[0]), lines[0]


@pytest.mark.parametrize(("overrides", "args", "variable"), CASES)
def test_bad_setting_stops_start_up(var_dir: Path, overrides: dict[str, str], args: list[str], variable: str) -> None:
    result = run_manage(*args, env=clean_env(var_dir, **overrides))
    _assert_one_line_naming(result, variable)


def test_serve_refuses_an_unreachable_redis(var_dir: Path) -> None:
    env = clean_env(var_dir, REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    result = run_manage("serve", "--port", str(free_port()), env=env)
    _assert_one_line_naming(result, "REDIS_URL")
    assert "no Redis answers" in result.stderr


def test_serve_refuses_an_unreachable_database(var_dir: Path) -> None:
    env = clean_env(var_dir, DATABASE_URL=f"postgres://postgres@127.0.0.1:{free_port()}/onevalet")
    result = run_manage("serve", "--port", str(free_port()), env=env)
    _assert_one_line_naming(result, "DATABASE_URL")
    assert "cannot connect" in result.stderr


def test_serve_refuses_a_port_in_use(var_dir: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_manage("serve", "--port", str(port), env=clean_env(var_dir))
    _assert_one_line_naming(result, "ONEVALET_PORT")


#: Warnings ``check --deploy`` still gives with a production-like environment; the README's
#: "check --deploy" section explains each of them.
EXPECTED_DEPLOY_WARNINGS = {"security.W005", "security.W021"}


def test_check_deploy_reports_no_errors(var_dir: Path) -> None:
    env = clean_env(
        var_dir,
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(64),
        CREDENTIALS_KEYS=Fernet.generate_key().decode(),
        ALLOWED_HOSTS="onevalet.example.com",
        CSRF_TRUSTED_ORIGINS="https://onevalet.example.com",
    )
    result = run_manage("check", "--deploy", "--fail-level", "ERROR", env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "ERRORS:" not in output
    warnings = set(re.findall(r"\((\w+\.W\d+)\)", output))
    assert warnings <= EXPECTED_DEPLOY_WARNINGS, output
    readme = (REPO / "README.md").read_text()
    for warning in warnings:
        assert warning in readme, f"{warning} is not explained in README.md"
