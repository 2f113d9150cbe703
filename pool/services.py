"""Writes of the pool: park a waiting agent, claim it back, pause, cancel, expire.

Claiming is one conditional UPDATE with a row-count check, so two processes handling
messages for the same user can never resume the same agent twice; no agent or LLM work
ever runs inside a transaction here — the callers restore, run the agent, then come back
to ``pool_entry_pause`` or ``pool_entry_remove``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from onevalet_site.errors import LimitReached, NotFound
from onevalet_site.system_tasks import system_task_schedule_sync
from orchestrator.agents import StandardAgent, agent_registry, schema_version
from orchestrator.models import Conversation
from pool.models import AgentPoolEntry
from pool.selectors import DEFAULT_STALE_CLAIM, active_count, resumable_q

logger = logging.getLogger("onevalet.pool")

EXPIRY_TASK_NAME = "pool: expire paused agents"
EXPIRY_TASK = "pool.tasks.expire_pool_entries"
EXPIRY_EVERY_MINUTES = 5


def pool_entry_create(*, owner_id: int, conversation_id: Any, agent_type: str, schema_version: str,
                      snapshot: dict[str, Any], tool_call_id: str = "", run_id: Any = None,
                      ttl_minutes: int, max_per_tenant: int) -> AgentPoolEntry:
    """Park a waiting agent. Refuses with ``LimitReached`` once the owner has too many."""
    now = timezone.now()
    with transaction.atomic():
        # Lock the owner's row so two concurrent creates cannot both pass the count.
        get_user_model().objects.select_for_update().filter(pk=owner_id).exists()
        if not Conversation.objects.filter(id=conversation_id, owner_id=owner_id).exists():
            raise NotFound("No such conversation.")
        if active_count(owner_id=owner_id, now=now) >= max_per_tenant:
            raise LimitReached(
                f"You already have {max_per_tenant} unfinished tasks waiting for an answer (the limit). "
                "Finish or cancel one of them first.", code="pool_limit_reached",
                details={"limit": max_per_tenant})
        return AgentPoolEntry.objects.create(
            owner_id=owner_id, conversation_id=conversation_id, run_id=run_id or None, tool_call_id=tool_call_id,
            agent_type=agent_type, schema_version=schema_version, updated_at=now,
            expires_at=now + timedelta(minutes=ttl_minutes), **_snapshot_columns(snapshot))


def pool_entry_resume(*, entry_id: Any, owner_id: int, now: datetime | None = None,
                      stale_after: timedelta = DEFAULT_STALE_CLAIM) -> AgentPoolEntry | None:
    """Claim a waiting entry for this process (status RUNNING); None if another got it or it expired."""
    now = now or timezone.now()
    claimed = AgentPoolEntry.objects.filter(resumable_q(now=now, stale_after=stale_after), id=entry_id,
                                            owner_id=owner_id).update(status=AgentPoolEntry.Status.RUNNING,
                                                                      updated_at=now)
    if claimed != 1:
        return None
    return AgentPoolEntry.objects.get(id=entry_id, owner_id=owner_id)


def pool_entry_pause(*, entry_id: Any, owner_id: int, snapshot: dict[str, Any], ttl_minutes: int) -> bool:
    """Store a claimed agent that is still waiting; its TTL restarts (the user is engaged)."""
    now = timezone.now()
    status = snapshot.get("status")
    if status not in AgentPoolEntry.WAITING:
        raise ValueError(f"only a waiting agent can be paused, not one in status {status!r}")
    updated = AgentPoolEntry.objects.filter(id=entry_id, owner_id=owner_id).update(
        updated_at=now, expires_at=now + timedelta(minutes=ttl_minutes), **_snapshot_columns(snapshot))
    return updated == 1


def pool_entry_remove(*, entry_id: Any, owner_id: int) -> bool:
    """Drop an entry whose agent finished (completed, failed or declined)."""
    deleted, _ = AgentPoolEntry.objects.filter(id=entry_id, owner_id=owner_id).delete()
    return deleted > 0


def pool_entry_cancel(*, entry_id: Any, owner_id: int) -> bool:
    """The user (or an admin) gave up on the task: the agent is gone, it will not ask again."""
    removed = pool_entry_remove(entry_id=entry_id, owner_id=owner_id)
    if removed:
        logger.info("pool entry %s cancelled", entry_id)
    return removed


def pool_entry_expire_now(*, entry_id: Any, owner_id: int) -> bool:
    """Make an entry unresumable at once; the expiry task deletes it on its next pass."""
    return AgentPoolEntry.objects.filter(id=entry_id, owner_id=owner_id).update(expires_at=timezone.now()) == 1


def pool_entry_restore(*, entry: AgentPoolEntry, agent_cls: type[StandardAgent] | None = None,
                       context: Any = None, now: datetime | None = None) -> StandardAgent | None:
    """The agent instance of an entry, or None after discarding an entry that must not run.

    An expired entry is never restored. An entry whose agent class is gone or whose
    schema version differs from the class's current one is deleted: its fields were
    collected against definitions that no longer exist.
    """
    if entry.expires_at <= (now or timezone.now()):
        return None
    agent_cls = agent_cls or agent_registry.get(entry.agent_type)
    if agent_cls is None:
        logger.warning("discarded pool entry %s: no agent named %r is registered", entry.id, entry.agent_type)
        pool_entry_remove(entry_id=entry.id, owner_id=entry.owner_id)
        return None
    current = schema_version(agent_cls)
    if entry.schema_version != current:
        logger.warning("discarded pool entry %s of %s: schema version %s, the agent is now at %s",
                       entry.id, entry.agent_type, entry.schema_version, current)
        pool_entry_remove(entry_id=entry.id, owner_id=entry.owner_id)
        return None
    return agent_cls.restore(entry.snapshot(), context=context)


def pool_entries_expire(*, now: datetime | None = None) -> int:
    """Delete every expired entry; returns how many went."""
    deleted, _ = AgentPoolEntry.objects.filter(expires_at__lte=now or timezone.now()).delete()
    if deleted:
        logger.info("expired %d paused agent(s)", deleted)
    return deleted


def pool_expiry_schedule_sync() -> None:
    """Create or update the beat schedule of the expiry task — this one system task, by name.

    Other periodic tasks (users' triggers) live in the same tables and are never touched;
    an operator who disabled this task keeps it disabled.
    """
    system_task_schedule_sync(name=EXPIRY_TASK_NAME, task=EXPIRY_TASK, every=EXPIRY_EVERY_MINUTES,
                              description="Deletes paused agents whose time ran out.")


def _snapshot_columns(snapshot: dict[str, Any]) -> dict[str, Any]:
    return {"status": snapshot["status"], "agent_status": snapshot["status"],
            "collected_fields": snapshot.get("fields") or {},
            "state": snapshot.get("state") or {}, "errors": snapshot.get("errors") or {},
            "question": snapshot.get("question") or "", "task_instruction": snapshot.get("task_instruction") or ""}
