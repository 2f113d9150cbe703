"""The Celery application: broker and result backend come from settings (``REDIS_URL``)."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "onevalet_site.settings")

app = Celery("onevalet")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _start_embedded_redis(**_: object) -> None:
    """A worker or beat started on its own still finds the embedded Redis running."""
    from onevalet_site.embedded_redis import ensure_for_settings

    ensure_for_settings()


@beat_init.connect
def _single_beat(**_: object) -> None:
    """Refuse to run a second beat (see onevalet_site/beat_lock.py)."""
    from onevalet_site.beat_lock import acquire_or_exit

    acquire_or_exit()
