"""One run at a time per conversation, across processes, in arrival order.

A message of a conversation waits for the one before it, whichever process (daphne, a
Celery worker) runs it; other conversations are not blocked. The lock is a Redis key with
a short lease renewed while the run is alive, so a crashed process frees it within one
lease instead of blocking the conversation for the longest possible run. Arrival order is
kept with a ticket counter: each waiter takes a ticket and enters only when every lower
ticket has finished or died.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
import weakref
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from django.conf import settings

LEASE_SECONDS = 15
RENEW_EVERY = 5
POLL_MAX = 0.05
REDIS_POOL_SIZE = 64
REDIS_POOL_TIMEOUT = 30

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = weakref.WeakKeyDictionary()


def redis_client() -> aioredis.Redis:
    """One asyncio Redis client per event loop (clients can't cross loops)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        # A blocking pool: under a burst of runs, a command waits for a free connection
        # instead of failing with "Too many connections" (redis-py's default pool holds 100).
        pool = aioredis.BlockingConnectionPool.from_url(settings.REDIS_URL, max_connections=REDIS_POOL_SIZE,
                                                        timeout=REDIS_POOL_TIMEOUT)
        client = aioredis.Redis(connection_pool=pool)
        _clients[loop] = client
    return client


def _prefix() -> str:
    return f"{settings.CACHES['default'].get('KEY_PREFIX', 'onevalet')}:conv"


# Take the next ticket and register it as waiting (score = ticket) in one step.
_TAKE = """
local ticket = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], ticket, ARGV[1])
redis.call('SET', KEYS[3] .. ARGV[1], '1', 'EX', ARGV[2])
return ticket
"""

# Enter when this waiter has the lowest live ticket. Waiters whose heartbeat expired
# (their process died) are removed first, so they never block the queue.
_ENTER = """
while true do
  local head = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #head == 0 then return 0 end
  if head[1] == ARGV[1] then return 1 end
  if redis.call('EXISTS', KEYS[2] .. head[1]) == 1 then return 0 end
  redis.call('ZREM', KEYS[1], head[1])
end
"""


@contextlib.asynccontextmanager
async def conversation_lock(conversation_id: str) -> AsyncIterator[None]:
    """Hold the conversation for one run; waits (FIFO) for earlier messages to finish."""
    client = redis_client()
    base = f"{_prefix()}:{conversation_id}"
    counter, queue, alive = f"{base}:ticket", f"{base}:queue", f"{base}:alive:"
    me = uuid.uuid4().hex
    await client.eval(_TAKE, 3, counter, queue, alive, me, LEASE_SECONDS)
    renewer = asyncio.create_task(_keep_alive(client, alive + me))
    try:
        delay = 0.002
        while not await client.eval(_ENTER, 2, queue, alive, me):
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX)
        yield
    finally:
        renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewer
        await client.zrem(queue, me)
        await client.delete(alive + me)
        await client.expire(counter, 3600)


async def _keep_alive(client: aioredis.Redis, key: str) -> None:
    while True:
        await asyncio.sleep(RENEW_EVERY)
        await client.set(key, "1", ex=LEASE_SECONDS)
