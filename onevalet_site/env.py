"""Typed readers for environment variables that fail loudly, naming the variable.

Every setting OneValet reads from the environment goes through these helpers so a
misconfiguration stops start-up with one sentence ("DATABASE_URL: ...") instead of a
traceback from deep inside a driver.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

import dj_database_url

from django.core.exceptions import ImproperlyConfigured


class ConfigError(ImproperlyConfigured):
    """A configuration value is missing or malformed; the message names the variable."""

    def __init__(self, variable: str, problem: str) -> None:
        self.variable = variable
        self.problem = problem
        super().__init__(f"{variable}: {problem}")


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """A string variable; ``NAME_FILE`` (a path) wins over ``NAME`` so secrets can live in files."""
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{name}_FILE", f"cannot read {file_path!r} ({exc.strerror})") from None
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(name, f"expected true/false, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(name, f"expected a whole number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(name, f"must be at least {minimum}, got {value}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(name, f"expected a number, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def database_from_url(url: str, *, variable: str = "DATABASE_URL") -> dict:
    """A DATABASES entry from ``postgres://user:pass@host:port/name`` or ``sqlite:///path``.

    Parsing is dj-database-url's; this wrapper limits the engines to the two OneValet is
    tested on and turns the library's errors into one line that names the variable.
    """
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except (dj_database_url.ParseError, dj_database_url.UnknownSchemeError, ValueError):
        raise ConfigError(variable, f"not a database URL: {redact_url(url)!r}; use postgres://user@host:5432/name or sqlite:///var/onevalet.db") from None
    engine = config["ENGINE"]
    if engine == "django.db.backends.sqlite3":
        if not config["NAME"]:
            raise ConfigError(variable, "a SQLite URL needs a file path, e.g. sqlite:///var/onevalet.db")
        # Opening a SQLite connection costs more than most queries; keep them for the thread's life.
        config["CONN_MAX_AGE"] = None
        # WAL + IMMEDIATE transactions let daphne, the worker and beat share one file without
        # "database is locked" on lock upgrades.
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    elif engine != "django.db.backends.postgresql":
        raise ConfigError(variable, f"unsupported database {engine.rsplit('.', 1)[-1]!r}; OneValet runs on PostgreSQL or SQLite")
    elif not config["NAME"]:
        raise ConfigError(variable, "missing database name, e.g. postgres://user@127.0.0.1:5432/onevalet")
    return config


def redact_url(url: str) -> str:
    """The URL with its password replaced, for error messages and logs."""
    parsed = urlparse(url)
    if parsed.password:
        return url.replace(f":{parsed.password}@", ":***@", 1)
    return url


def check_redis_url(url: str, *, variable: str = "REDIS_URL") -> str:
    parsed = urlparse(url)
    if parsed.scheme not in {"redis", "rediss", "unix"}:
        raise ConfigError(variable, f"unsupported scheme {parsed.scheme or '(none)'!r}; use redis://host:port/db or unix:///path.sock")
    if parsed.scheme != "unix" and not parsed.hostname:
        raise ConfigError(variable, "missing host, e.g. redis://127.0.0.1:6379/0")
    try:
        parsed.port
    except ValueError:
        raise ConfigError(variable, "the port is not a number") from None
    return url
