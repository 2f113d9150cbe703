"""Fixtures for the foundation tests (helpers live in ``helpers.py``)."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import pytest

@pytest.fixture
def var_dir() -> Iterator[Path]:
    """A fresh, short var dir (the embedded Redis's unix socket path must stay under 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="ovf-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def serve_urls() -> Iterator[dict[str, str]]:
    """DATABASE_URL / REDIS_URL for a ``serve`` subprocess, following the suite's mode.

    Embedded default (no DATABASE_URL in the environment): nothing, ``serve`` uses SQLite and
    its own embedded Redis under its var dir. With Postgres: a throw-away database on the
    same server, dropped afterwards, so the server's migrations never touch the suite's.
    With an external Redis: database 15 of it, so the started worker cannot take tasks
    queued by the rest of the suite on database 0.
    """
    urls: dict[str, str] = {}
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        parsed = urlparse(redis_url)
        urls["REDIS_URL"] = urlunparse(parsed._replace(path="/15"))
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        yield urls
        return
    import psycopg

    name = f"onevalet_serve_{secrets.token_hex(4)}"
    admin_url = urlunparse(urlparse(database_url)._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    urls["DATABASE_URL"] = urlunparse(urlparse(database_url)._replace(path=f"/{name}"))
    try:
        yield urls
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
