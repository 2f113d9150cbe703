"""``manage.py serve``: the one command that runs a complete OneValet (``make run``).

The logic lives in :mod:`onevalet_site.supervisor`; this wrapper only parses options.
"""

from __future__ import annotations

import sys
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from onevalet_site import supervisor


class Command(BaseCommand):
    help = (
        "Check the configuration, migrate, collect static files, ensure an admin account, then run "
        "daphne, a Celery worker, Celery beat (and the embedded Redis when REDIS_URL is unset) until "
        "Ctrl-C."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default=None, help="address to listen on (env ONEVALET_HOST, default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=None, help="port to listen on (env ONEVALET_PORT, default 8000)")

    def handle(self, *args: Any, **options: Any) -> None:
        status = supervisor.run(options["host"], options["port"], out=sys.stdout, err=sys.stderr)
        if status:
            sys.exit(status)
