"""Exactly one Celery beat: a second one would send every schedule twice.

Beat takes a Redis key (``SET NX`` with a short expiry) when it starts and renews it from
a daemon thread while it runs; a second beat finds the key held by a live beat and exits
with one line saying who holds it. A beat killed without cleanup frees the key within
``LEASE_SECONDS``. Trigger runs are unique per firing anyway, so a duplicate send would
run once; the lock keeps beat's own bookkeeping (one-off tasks, last-run times) sane.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import sys
import threading

import redis
from django.conf import settings

logger = logging.getLogger("onevalet.beat")

LEASE_SECONDS = 30
RENEW_SECONDS = 10

# Renew only while the key is still ours, so a beat that lost it never steals it back.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def lock_key() -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'onevalet')}:beat-lock"


def acquire_or_exit() -> None:
    """Called from ``beat_init``: hold the lock for this process's life, or exit."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    me = f"{socket.gethostname()}:{os.getpid()}"
    if not client.set(lock_key(), me, nx=True, ex=LEASE_SECONDS):
        holder = client.get(lock_key())
        holder_text = holder.decode() if isinstance(holder, bytes) else holder
        sys.stderr.write(f"OneValet: another celery beat is already running ({holder_text}); "
                         "run exactly one beat. Exiting.\n")
        sys.stderr.flush()
        os._exit(3)  # beat_init runs inside beat's start-up; a plain exit would be swallowed
    renewer = threading.Thread(target=_renew, args=(client, me), name="onevalet-beat-lock", daemon=True)
    renewer.start()
    atexit.register(_release, client, me)  # a stopped beat frees the lock at once


def _release(client: redis.Redis, me: str) -> None:
    try:
        client.eval(_RELEASE, 1, lock_key(), me)
    except redis.RedisError:
        pass  # the lease runs out on its own


def _renew(client: redis.Redis, me: str) -> None:
    stop = threading.Event()
    while not stop.wait(RENEW_SECONDS):
        try:
            if not client.eval(_RENEW, 1, lock_key(), me, LEASE_SECONDS):
                logger.error("lost the beat lock to another beat; this beat keeps running but should be stopped")
        except redis.RedisError:
            logger.warning("could not renew the beat lock", exc_info=True)
