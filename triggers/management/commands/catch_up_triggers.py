"""``manage.py catch_up_triggers``: apply missed-run policies; run before beat starts."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from triggers.catchup import catch_up


class Command(BaseCommand):
    help = "Handle schedule triggers that were due while OneValet was down (run at start-up, before beat)."

    def handle(self, *args: Any, **options: Any) -> None:
        report = catch_up()
        self.stdout.write(f"missed runs: {len(report.fired)} fired late, {len(report.skipped)} skipped, "
                          f"{len(report.asked)} asked; {len(report.recovered_runs)} interrupted runs re-queued")
