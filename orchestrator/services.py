"""Writes of the orchestrator app: starting a run and persisting what it produced.

Both run outside any LLM or tool call: ``run_start`` before the loop, ``run_finish`` after
it, each in one short transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from orchestrator.models import Conversation, LoopRun, LoopTurn, Message, Source, ToolInvocation, UserProfile
from orchestrator.selectors import conversation_get, recent_history
from orchestrator.types import ReactLoopResult, RunStatus

TITLE_CHARS = 80


@dataclass(slots=True)
class RunStart:
    """What the loop needs from the database, loaded in one go."""

    conversation_id: str
    run_id: str
    history: list[dict[str, Any]]  # OpenAI-format, oldest first, the new user message last
    timezone: str
    display_name: str


def conversation_create(*, owner_id: int, title: str = "") -> Conversation:
    return Conversation.objects.create(owner_id=owner_id, title=title[:TITLE_CHARS])


def profile_update(*, user_id: int, display_name: str | None = None, timezone_name: str | None = None) -> UserProfile:
    profile, _ = UserProfile.objects.get_or_create(user_id=user_id)
    if display_name is not None:
        profile.display_name = display_name
    if timezone_name is not None:
        profile.timezone = timezone_name
    profile.full_clean()
    profile.save()
    return profile


@transaction.atomic
def run_start(*, owner_id: int, content: str | None, conversation_id: Any = None, source: str = Source.WEB,
              model: str = "", history_limit: int = 200) -> RunStart:
    """Store the user's message, open a ``LoopRun`` and load the history the loop will see.

    ``content=None`` opens a run with no new message: a continuation of an existing
    conversation (after approvals were decided) whose input is already in the history.
    """
    if conversation_id:
        conversation = conversation_get(owner_id=owner_id, conversation_id=conversation_id)
    else:
        first_line = (content or "").strip().splitlines()[0] if (content or "").strip() else ""
        conversation = conversation_create(owner_id=owner_id, title=first_line)
    profile, _ = UserProfile.objects.get_or_create(user_id=owner_id)
    run = LoopRun.objects.create(owner_id=owner_id, conversation=conversation, source=source, model=model)
    if content is not None:
        Message.objects.create(conversation=conversation, owner_id=owner_id, run=run, role=Message.Role.USER,
                               content=content, source=source)
    history = messages_for_llm(recent_history(conversation=conversation, limit=history_limit))
    return RunStart(conversation_id=str(conversation.id), run_id=str(run.id), history=history,
                    timezone=profile.timezone, display_name=profile.display_name)


def messages_for_llm(rows: list[Message]) -> list[dict[str, Any]]:
    """Stored rows as OpenAI chat messages, leaving out any tool-call group left incomplete.

    A run that crashed between the assistant's tool calls and their results would leave a
    history the API rejects; such a group is skipped, as are tool results whose call was
    cut off by the load limit.
    """
    result: list[dict[str, Any]] = []
    index = 0
    while index < len(rows):
        row = rows[index]
        if row.role == Message.Role.TOOL:
            index += 1  # orphan: its assistant message is not in the window
            continue
        if row.role == Message.Role.ASSISTANT and row.tool_calls:
            wanted = {call["id"] for call in row.tool_calls}
            results = []
            index += 1
            while index < len(rows) and rows[index].role == Message.Role.TOOL:
                results.append(rows[index])
                index += 1
            if {r.tool_call_id for r in results} >= wanted:
                result.append({"role": "assistant", "content": row.content or None, "tool_calls": [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                    for c in row.tool_calls]})
                result.extend({"role": "tool", "tool_call_id": r.tool_call_id, "content": r.content}
                              for r in results if r.tool_call_id in wanted)
            continue
        result.append({"role": row.role, "content": row.content})
        index += 1
    return result


@transaction.atomic
def run_finish(*, owner_id: int, run_id: str, conversation_id: str, result: ReactLoopResult, source: str) -> LoopRun:
    """Persist the run's new messages, turns and tool calls, and close the run."""
    errors = {record.tool_call_id for record in result.tool_calls if not record.success}
    names: dict[str, str] = {}
    rows: list[Message] = []
    for message in result.new_messages:
        role = message["role"]
        if role == "assistant":
            calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                     for c in message.get("tool_calls", ())]
            names.update({c["id"]: c["name"] for c in calls})
            rows.append(Message(conversation_id=conversation_id, owner_id=owner_id, run_id=run_id, role=role,
                                content=message.get("content") or "", tool_calls=calls, source=source))
        elif role == "tool":
            call_id = message["tool_call_id"]
            rows.append(Message(conversation_id=conversation_id, owner_id=owner_id, run_id=run_id, role=role,
                                content=message["content"], tool_call_id=call_id, name=names.get(call_id, ""),
                                is_error=call_id in errors, source=source))
    if result.status != RunStatus.COMPLETED and result.response:
        # A question from a waiting agent, or the apology of a failed run: the user sees it
        # in the conversation like any answer.
        rows.append(Message(conversation_id=conversation_id, owner_id=owner_id, run_id=run_id,
                            role=Message.Role.ASSISTANT, content=result.response, source=source))
    Message.objects.bulk_create(rows)
    LoopTurn.objects.bulk_create([
        LoopTurn(run_id=run_id, index=t.index, input_messages=t.input_messages, input_chars=t.input_chars,
                 output_text=t.output_text, input_tokens=t.usage.input_tokens, output_tokens=t.usage.output_tokens,
                 llm_duration_ms=t.llm_duration_ms, recovery_steps=t.recovery_steps)
        for t in result.turn_records
    ])
    ToolInvocation.objects.bulk_create([
        ToolInvocation(run_id=run_id, owner_id=owner_id, turn_index=r.turn, tool_call_id=r.tool_call_id, name=r.name,
                       args_summary=r.args_summary, duration_ms=r.duration_ms, success=r.success,
                       result_status=r.result_status or "", result_chars=r.result_chars,
                       input_tokens=r.token_attribution.input_tokens if r.token_attribution else 0,
                       output_tokens=r.token_attribution.output_tokens if r.token_attribution else 0)
        for r in result.tool_calls
    ])
    LoopRun.objects.filter(id=run_id, owner_id=owner_id).update(
        status=str(result.status), response=result.response, turns=result.turns,
        input_tokens=result.token_usage.input_tokens, output_tokens=result.token_usage.output_tokens,
        duration_ms=result.duration_ms, error=result.error, finished_at=timezone.now())
    Conversation.objects.filter(id=conversation_id).update(updated_at=timezone.now())
    return LoopRun.objects.get(id=run_id)


def run_fail(*, owner_id: int, run_id: str, error: str) -> None:
    """Close a run that ended in an exception (misconfigured LLM, cancelled task)."""
    LoopRun.objects.filter(id=run_id, owner_id=owner_id, status=LoopRun.Status.RUNNING).update(
        status=LoopRun.Status.FAILED, error=error[:2000], finished_at=timezone.now())
