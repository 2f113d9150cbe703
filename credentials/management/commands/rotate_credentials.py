"""``manage.py rotate_credentials``: re-encrypt every stored credential with the newest key.

Key rotation: put a new key first in ``CREDENTIALS_KEYS`` (keeping the old ones after it),
run this command, then drop the old keys. Rows are processed in pk order, in batches, each
row its own short write, so a run can be stopped at any time and resumed with
``--start-after`` the last pk it printed; rows already sealed with the newest key are
skipped, so a plain re-run from the start is harmless too.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from credentials.services import RotationBatch, credential_rotate_batch


class Command(BaseCommand):
    help = "Re-encrypt every stored credential with the newest CREDENTIALS_KEYS key (resumable)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=200, help="rows per batch (default 200)")
        parser.add_argument(
            "--start-after", type=int, default=0, help="resume after this credential pk (printed by a previous run)"
        )
        parser.add_argument(
            "--force", action="store_true", help="re-encrypt rows the newest key already opens as well"
        )

    def handle(self, *args: Any, batch_size: int, start_after: int, force: bool, **options: Any) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        total = RotationBatch()
        cursor = start_after
        while True:
            batch = credential_rotate_batch(after_pk=cursor, batch_size=batch_size, force=force)
            if batch.last_pk is None:
                break
            cursor = batch.last_pk
            total.rotated += batch.rotated
            total.already_current += batch.already_current
            total.changed_meanwhile += batch.changed_meanwhile
            total.failed.extend(batch.failed)
            self.stdout.write(
                f"up to pk {cursor}: rotated {batch.rotated}, already current {batch.already_current}, "
                f"changed meanwhile {batch.changed_meanwhile}, failed {len(batch.failed)} "
                f"(resume with --start-after {cursor})"
            )
            if batch.seen < batch_size:
                break
        self.stdout.write(
            f"done: rotated {total.rotated}, already current {total.already_current}, "
            f"changed meanwhile {total.changed_meanwhile}, failed {len(total.failed)}"
        )
        for label in total.failed:
            self.stderr.write(f"failed: {label}")
        if total.failed:
            raise CommandError(
                f"{len(total.failed)} credential(s) could not be decrypted with any configured key; "
                "they were left as they are (restore the key that sealed them, or save them again)"
            )
