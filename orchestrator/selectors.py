"""Reads of the orchestrator app, each scoped to its owner."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Avg, Count, Q, QuerySet

from onevalet_site.errors import NotFound
from orchestrator.models import Conversation, LoopRun, Message, ToolInvocation, UserProfile


def conversation_get(*, owner_id: int, conversation_id: Any) -> Conversation:
    """The owner's conversation; another user's id or a malformed one is simply not found."""
    try:
        return Conversation.objects.get(id=conversation_id, owner_id=owner_id)
    except (Conversation.DoesNotExist, ValidationError, ValueError, TypeError):
        raise NotFound("No such conversation.") from None


def conversation_list(*, owner_id: int) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner_id=owner_id).order_by("-updated_at")


def message_list(*, owner_id: int, conversation_id: Any) -> QuerySet[Message]:
    conversation = conversation_get(owner_id=owner_id, conversation_id=conversation_id)
    return Message.objects.filter(conversation=conversation, owner_id=owner_id).order_by("id")


def recent_history(*, conversation: Conversation, limit: int) -> list[Message]:
    """The newest ``limit`` stored messages, oldest first."""
    rows = list(Message.objects.filter(conversation=conversation).order_by("-id")[:limit])
    rows.reverse()
    return rows


def profile_for(*, user_id: int) -> UserProfile:
    profile, _ = UserProfile.objects.get_or_create(user_id=user_id)
    return profile


def run_get(*, owner_id: int, run_id: Any) -> LoopRun:
    try:
        return LoopRun.objects.get(id=run_id, owner_id=owner_id)
    except (LoopRun.DoesNotExist, ValidationError, ValueError, TypeError):
        raise NotFound("No such run.") from None


def tool_stats(*, since=None, owner_id: int | None = None) -> list[dict[str, Any]]:
    """Per-tool calls, success rate and mean duration (admin statistics)."""
    rows = ToolInvocation.objects.all()
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if owner_id is not None:
        rows = rows.filter(owner_id=owner_id)
    stats = rows.values("name").annotate(calls=Count("id"), successes=Count("id", filter=Q(success=True)),
                                         mean_ms=Avg("duration_ms")).order_by("-calls")
    return [{**s, "success_rate": s["successes"] / s["calls"], "success_pct": round(100 * s["successes"] / s["calls"], 1)}
            for s in stats]
