"""Celery tasks of the pool; thin: they call a service."""

from __future__ import annotations

from celery import shared_task

from pool.services import pool_entries_expire


@shared_task(name="pool.tasks.expire_pool_entries", ignore_result=True)
def expire_pool_entries() -> int:
    """Periodic (django-celery-beat, see ``pool_expiry_schedule_sync``): drop expired paused agents."""
    return pool_entries_expire()
