"""What a firing does: the assistant's ReAct loop by default, or a registered pipeline.

``OrchestratorExecutor`` turns the firing into a message ("[Scheduled task] ...") and lets
the assistant decide what to do, in a conversation kept per task so later runs see earlier
ones. Deterministic, high-frequency work does not need an LLM call per firing: subclass
``ActionExecutor``, give it a ``name`` and register it (``@register_executor`` or the
``TRIGGERS_EXECUTORS`` setting, name -> dotted path, loaded lazily).

Executors run outside any transaction (they call the LLM and tools); they return an
``ActionResult`` and the firing code records it and notifies.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import importlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from asgiref.sync import async_to_sync
from django.conf import settings

from onevalet_site.errors import InvalidInput, OneValetError
from orchestrator.types import RunStatus
from triggers.models import TriggerRun, TriggerTask


@dataclass(slots=True)
class TriggerContext:
    """Everything an executor may know about one firing."""

    task: TriggerTask
    run: TriggerRun
    trigger_type: str  # "schedule" | "event" | "condition" | "manual"
    payload: dict[str, Any] = field(default_factory=dict)
    late: bool = False


@dataclass(slots=True)
class ActionResult:
    """The outcome of one execution. ``status`` is a ``TriggerRun.Status`` value."""

    status: str
    output: str = ""
    error: str = ""
    title: str = ""
    link: str = ""
    loop_run_id: str | None = None
    notify: bool = True
    data: dict[str, Any] = field(default_factory=dict)


class ActionExecutor(ABC):
    """Base of every executor: one ``execute`` per firing, no shared mutable state."""

    name: ClassVar[str]

    def validate(self, action: dict[str, Any]) -> None:
        """Refuse a task whose ``action`` this executor cannot run (called on save)."""

    @abstractmethod
    def execute(self, context: TriggerContext) -> ActionResult:
        """Run one firing; never raise for an expected failure, return a failed result."""


_registry: dict[str, type[ActionExecutor]] = {}


def register_executor(cls: type[ActionExecutor]) -> type[ActionExecutor]:
    _registry[cls.name] = cls
    return cls


def get_executor(name: str) -> ActionExecutor:
    """The executor registered under ``name``; settings' dotted paths are imported on demand."""
    if name not in _registry:
        path = getattr(settings, "TRIGGERS_EXECUTORS", {}).get(name)
        if path:
            module, _, attr = path.rpartition(".")
            register_executor(getattr(importlib.import_module(module), attr))
    cls = _registry.get(name)
    if cls is None:
        known = sorted({*_registry, *getattr(settings, "TRIGGERS_EXECUTORS", {})})
        raise InvalidInput(f"unknown executor {name!r}; known: {', '.join(known)}", code="invalid_executor")
    return cls()


def build_message(context: TriggerContext) -> str:
    """The text the assistant receives for a firing: what kind of firing, and its content."""
    task = context.task
    late = " (this run is late: OneValet was not running at the scheduled time)" if context.late else ""
    if context.trigger_type == "event":
        event = context.payload
        data = json.dumps(event.get("data", {}), ensure_ascii=False, sort_keys=True)
        body = f"[Event] {event.get('source', '')}/{event.get('type', '')}: {data}"
        return body + (f"\nInstruction: {task.instruction}" if task.instruction else "")
    if context.trigger_type == "condition":
        body = f"[Condition met] {context.payload.get('description', '')}"
        return body + (f"\nInstruction: {task.instruction}" if task.instruction else "")
    return f"[Scheduled task] {task.instruction or task.name}{late}"


@register_executor
class OrchestratorExecutor(ActionExecutor):
    """The assistant decides: the firing becomes a message in the task's own conversation."""

    name = "orchestrator"

    def validate(self, action: dict[str, Any]) -> None:
        if not str(action.get("instruction", "")).strip():
            raise InvalidInput('the action needs an "instruction" for the assistant', code="invalid_action")

    def execute(self, context: TriggerContext) -> ActionResult:
        from orchestrator.orchestrator import get_orchestrator
        from triggers.services import trigger_task_conversation

        conversation_id = trigger_task_conversation(task=context.task)
        # Each firing runs in a new event loop (async_to_sync in a worker); the LLM client
        # keeps one SDK client per loop, so the process-wide orchestrator is safe to reuse.
        orchestrator = get_orchestrator()
        try:
            outcome = async_to_sync(orchestrator.handle_message)(
                user_id=context.task.owner_id, content=build_message(context),
                conversation_id=conversation_id, source="trigger")
        except OneValetError as exc:
            return ActionResult(status=TriggerRun.Status.FAILED, error=exc.message,
                                output=f"The task could not run: {exc.message}")
        result = outcome.result
        chat_link = f"/chat/?conversation={outcome.conversation_id}"
        common = {"loop_run_id": outcome.run_id, "data": {"conversation": outcome.conversation_id}}
        match result.status:
            case RunStatus.WAITING_FOR_APPROVAL:
                return ActionResult(status=TriggerRun.Status.PENDING_APPROVAL, link="/approvals/",
                                    output=result.response or "An action is waiting for your approval.",
                                    title=f"{context.task.name}: approval needed", **common)
            case RunStatus.FAILED | RunStatus.REFUSED:
                return ActionResult(status=TriggerRun.Status.FAILED, error=result.error or result.response,
                                    output=result.response or "The task failed.", link=chat_link, **common)
            case RunStatus.COMPLETED | RunStatus.WAITING_FOR_INPUT:
                # Waiting for input: the question is the answer the user needs to see.
                return ActionResult(status=TriggerRun.Status.COMPLETED, output=result.response, link=chat_link,
                                    **common)
        return ActionResult(status=TriggerRun.Status.FAILED, error=f"unexpected loop status {result.status}")


@register_executor
class NotifyExecutor(ActionExecutor):
    """No LLM: send a fixed message — reminders, "take your pills", a ping on an event.

    ``action``: ``{"message": "Stretch!", "title": "optional"}``; for events the message may
    use ``{type}``/``{source}`` and top-level data fields, e.g. ``"Mail from {from}"``.
    """

    name = "notify"

    def validate(self, action: dict[str, Any]) -> None:
        if not str(action.get("message", "")).strip():
            raise InvalidInput('the notify executor needs a "message"', code="invalid_action")

    def execute(self, context: TriggerContext) -> ActionResult:
        action = context.task.action or {}
        message = str(action.get("message", ""))
        fields = {"source": context.payload.get("source", ""), "type": context.payload.get("type", ""),
                  **{k: v for k, v in (context.payload.get("data") or {}).items() if isinstance(k, str)}}
        try:
            message = message.format_map(_Lenient(fields))
        except (ValueError, IndexError, AttributeError):
            pass  # a stray brace in a user's text is not an error: send it as written
        return ActionResult(status=TriggerRun.Status.COMPLETED, output=message,
                            title=str(action.get("title") or context.task.name))


class _Lenient(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"
