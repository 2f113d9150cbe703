"""``manage.py run_event_consumer``: match bus events to event triggers, forever."""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand

from triggers.event_bus import EventConsumer


class Command(BaseCommand):
    help = "Read the event stream as a consumer-group member and fire matching event triggers."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--name", help="Consumer name (default host:pid).")
        parser.add_argument("--claim-idle-ms", type=int, default=60_000,
                            help="Re-claim entries another consumer left unacknowledged this long.")
        parser.add_argument("--once", action="store_true", help="Handle one batch and exit.")

    def handle(self, *args: Any, **options: Any) -> None:
        consumer = EventConsumer(name=options["name"], claim_idle_ms=options["claim_idle_ms"])
        stopping = False

        def stop(*_: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"event consumer {consumer.name} reading {consumer.bus.stream}")
        while not stopping:
            consumer.run_once(block_ms=1000)
            if options["once"]:
                break
