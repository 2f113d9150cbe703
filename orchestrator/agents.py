"""Stateful agents: ``@valet`` classes that collect fields, may ask for approval, then act.

A plain tool answers in one call. An agent may need more from the user first: a missing
recipient, an invalid date, a "yes" before an email goes out. The agent keeps what it has
collected so far, asks its question, and is paused in the pool (``pool`` app) until the
user's next message. Everything an agent keeps between messages is JSON (``snapshot``),
so any process can resume it; the InputField definitions are hashed into a schema version
so a paused agent is never resumed by a class whose fields have changed since.

This module is pure: no ORM, no LLM. ``orchestrator.agent_tools`` adapts agents to the
loop's ``Tool`` protocol and to the pool.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import enum
import hashlib
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from orchestrator.tool_schema import ArgumentError, coerce_arguments, json_type


class AgentStatus(StrEnum):
    RUNNING = "running"
    WAITING_FOR_INPUT = "waiting_for_input"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    COMPLETED = "completed"
    ERROR = "error"
    CANCELLED = "cancelled"

    @property
    def waiting(self) -> bool:
        return self in (AgentStatus.WAITING_FOR_INPUT, AgentStatus.WAITING_FOR_APPROVAL)


class ApprovalDecision(StrEnum):
    APPROVE = "approve"
    EDIT = "edit"
    CANCEL = "cancel"


Validator = Callable[[Any], "str | None"]


@dataclass(frozen=True, slots=True)
class InputField:
    """One value an agent needs. ``validator(value)`` returns None when fine, else the problem."""

    name: str
    type: Any = str
    description: str = ""
    required: bool = True
    default: Any = None
    validator: Validator | None = None
    validator_description: str = ""

    def check(self, value: Any) -> tuple[Any, str | None]:
        """``(converted value, None)`` or ``(None, problem)`` — type first, then the validator."""
        try:
            converted = coerce_arguments({self.name: (self.type, inspect.Parameter.empty)}, {self.name: value})
        except ArgumentError as exc:
            return None, str(exc)
        value = converted[self.name]
        if self.validator is not None:
            problem = self.validator(value)
            if problem:
                return None, str(problem)
        return value, None

    def from_reply(self, text: str) -> Any:
        """A user's typed reply as this field's type: strings stay text, the rest is read as JSON."""
        text = text.strip()
        if self.type is str:
            return text
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text  # ``check`` then names the type problem

    def label(self) -> str:
        return self.name.replace("_", " ")


@dataclass(frozen=True, slots=True)
class OutputField:
    """Documents one value an agent's result carries in ``AgentResult.data``."""

    name: str
    type: Any = str
    description: str = ""


@dataclass(slots=True)
class AgentResult:
    """What one step of an agent produced. ``message`` is what the LLM (or the user) reads."""

    status: AgentStatus
    message: str
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def completed(cls, message: str, **data: Any) -> AgentResult:
        return cls(AgentStatus.COMPLETED, message, data)

    @classmethod
    def error(cls, message: str, **data: Any) -> AgentResult:
        return cls(AgentStatus.ERROR, message, data)


_YES = re.compile(r"^\s*(y|yes|yep|yeah|sure|ok|okay|approve[d]?|confirm(ed)?|go ahead|do it|send it)\b", re.I)
_NO = re.compile(r"^\s*(n|no|nope|don'?t|do not|reject(ed)?|deny|decline)\b", re.I)
_FIELD_LINE = re.compile(r"^\s*([A-Za-z][\w ]{0,40}?)\s*[:=]\s*(.+?)\s*$")


class StandardAgent(ABC):
    """Base of every agent. Subclasses declare ``input_fields`` and implement ``on_running``.

    The engine (``start`` / ``reply``) adopts valid values, drops invalid ones with the
    validator's message, defaults optional ones and asks for what is still missing; when
    everything is there it asks for approval if ``needs_approval()``, then runs.
    """

    name: ClassVar[str] = ""
    input_fields: ClassVar[tuple[InputField, ...]] = ()
    output_fields: ClassVar[tuple[OutputField, ...]] = ()
    expose_as_tool: ClassVar[bool] = True

    def __init__(self, *, context: Any = None, fields: dict[str, Any] | None = None,
                 state: dict[str, Any] | None = None, status: AgentStatus = AgentStatus.RUNNING,
                 question: str = "", errors: dict[str, str] | None = None, task_instruction: str = "") -> None:
        self.context = context  # orchestrator.tools.ToolExecutionContext; rebuilt on every resume
        self.fields: dict[str, Any] = dict(fields or {})
        self.state: dict[str, Any] = dict(state or {})
        self.status = AgentStatus(status)
        self.question = question
        self.errors: dict[str, str] = dict(errors or {})
        self.task_instruction = task_instruction

    # --- hooks for subclasses -------------------------------------------------------------
    @abstractmethod
    async def on_running(self) -> AgentResult:
        """Do the work with ``self.fields`` (all valid) and ``self.context``."""

    def needs_approval(self) -> bool:
        """True when the action is irreversible enough that the user must confirm it first."""
        return False

    def approval_summary(self) -> tuple[str, dict[str, Any]]:
        """``(one-line action summary, details)`` shown to the user before approving."""
        return f"Run {self.agent_name()}", dict(self.fields)

    async def parse_approval(self, reply: str) -> ApprovalDecision | None:
        """The user's answer to the approval question; None when it is neither yes nor no."""
        if _YES.match(reply):
            return ApprovalDecision.APPROVE
        if _NO.match(reply):
            return ApprovalDecision.CANCEL
        return None

    # --- engine ---------------------------------------------------------------------------
    @classmethod
    def agent_name(cls) -> str:
        return cls.name or cls.__name__

    async def start(self, arguments: dict[str, Any]) -> AgentResult:
        """First step, with the arguments the LLM extracted from the conversation."""
        instruction = arguments.get("task_instruction")
        if isinstance(instruction, str):
            self.task_instruction = instruction
        self.absorb({k: v for k, v in arguments.items() if k != "task_instruction"})
        return await self.advance()

    async def reply(self, text: str) -> AgentResult:
        """The user's next message: an approval answer, or value(s) for the asked field(s)."""
        if self.status == AgentStatus.WAITING_FOR_APPROVAL:
            return await self._approval_reply(text)
        self.absorb(self.parse_reply(text))
        return await self.advance()

    def absorb(self, values: dict[str, Any]) -> None:
        """Adopt valid values; record a problem (and forget the value) for invalid ones."""
        specs = {spec.name: spec for spec in self.input_fields}
        for name, value in values.items():
            spec = specs.get(name)
            if spec is None or value is None or value == "":
                continue
            converted, problem = spec.check(value)
            if problem is None:
                self.fields[name] = converted
                self.errors.pop(name, None)
            else:
                self.fields.pop(name, None)
                self.errors[name] = problem

    def to_ask(self) -> list[InputField]:
        """Fields still needed, in declaration order: invalid ones and missing required ones."""
        return [spec for spec in self.input_fields
                if spec.name in self.errors or (spec.required and spec.name not in self.fields)]

    def parse_reply(self, text: str) -> dict[str, Any]:
        """Values in a reply. One field asked: the whole reply is its value. Several:
        ``field: value`` lines are read, and a reply without any goes to the first asked field.
        """
        asked = self.to_ask()
        if not asked:
            return {}
        if len(asked) == 1:
            return {asked[0].name: asked[0].from_reply(text)}
        by_label = {spec.name.lower(): spec for spec in self.input_fields}
        by_label.update({spec.label().lower(): spec for spec in self.input_fields})
        values: dict[str, Any] = {}
        for line in text.splitlines():
            match = _FIELD_LINE.match(line)
            spec = by_label.get(match.group(1).strip().lower()) if match else None
            if spec is not None:
                values[spec.name] = spec.from_reply(match.group(2))
        return values or {asked[0].name: asked[0].from_reply(text)}

    async def advance(self) -> AgentResult:
        """Ask for what is missing, else for approval, else run."""
        asked = self.to_ask()
        if asked:
            return self._wait(AgentStatus.WAITING_FOR_INPUT, self.input_question(asked))
        for spec in self.input_fields:
            if spec.name not in self.fields and not spec.required:
                self.fields[spec.name] = spec.default
        if self.needs_approval() and not self.state.get("_approved"):
            summary, details = self.approval_summary()
            return self._wait(AgentStatus.WAITING_FOR_APPROVAL, self.approval_question(summary, details))
        return await self._run()

    def input_question(self, asked: list[InputField]) -> str:
        problems = [f"The {spec.label()} given was not usable: {self.errors[spec.name]}."
                    for spec in asked if spec.name in self.errors]
        wanted = [f"{spec.label()} ({spec.description})" if spec.description else spec.label() for spec in asked]
        if len(wanted) == 1:
            ask = f"What is the {wanted[0]}?"
        else:
            ask = ("I still need: " + "; ".join(wanted)
                   + ". Reply with one 'name: value' line each, or just the first one.")
        return " ".join([*problems, ask])

    def approval_question(self, summary: str, details: dict[str, Any]) -> str:
        lines = [f"{summary}. Shall I go ahead? (yes / no)"]
        lines += [f"- {key.replace('_', ' ')}: {value}" for key, value in details.items()]
        return "\n".join(lines)

    async def _approval_reply(self, text: str) -> AgentResult:
        decision = await self.parse_approval(text)
        if decision == ApprovalDecision.APPROVE:
            self.state["_approved"] = True
            return await self._run()
        if decision == ApprovalDecision.CANCEL:
            self.status = AgentStatus.CANCELLED
            return AgentResult(AgentStatus.CANCELLED, f"{self.agent_name()} was cancelled: the user declined.")
        summary, details = self.approval_summary()
        return self._wait(AgentStatus.WAITING_FOR_APPROVAL,
                          "Please answer yes or no. " + self.approval_question(summary, details))

    def _wait(self, status: AgentStatus, question: str) -> AgentResult:
        self.status, self.question = status, question
        return AgentResult(status, question)

    async def _run(self) -> AgentResult:
        self.status = AgentStatus.RUNNING
        result = await self.on_running()
        self.status = result.status
        return result

    # --- persistence ----------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything needed to resume, as JSON-ready data (raises if a value is not JSON)."""
        data = {"fields": self.fields, "state": self.state, "status": str(self.status), "question": self.question,
                "errors": self.errors, "task_instruction": self.task_instruction}
        return json.loads(json.dumps(data, default=_json_default))

    @classmethod
    def restore(cls, snapshot: dict[str, Any], *, context: Any = None) -> StandardAgent:
        return cls(context=context, fields=snapshot.get("fields"), state=snapshot.get("state"),
                   status=AgentStatus(snapshot.get("status", AgentStatus.WAITING_FOR_INPUT)),
                   question=snapshot.get("question", ""), errors=snapshot.get("errors"),
                   task_instruction=snapshot.get("task_instruction", ""))


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"agent state must be JSON-serialisable; got {type(value).__name__}")


def schema_version(agent_cls: type[StandardAgent]) -> str:
    """A stable hash of the InputField definitions: names, types, required, defaults.

    Computed, never bumped by hand, so a forgotten bump cannot let a stale paused agent
    run against changed fields.
    """
    parts = [[spec.name, json.dumps(json_type(spec.type), sort_keys=True), spec.required, repr(spec.default)]
             for spec in agent_cls.input_fields]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


class AgentRegistry:
    """Agent name -> class, exposed or not, with each class's schema version."""

    def __init__(self) -> None:
        self._agents: dict[str, type[StandardAgent]] = {}

    def register(self, agent_cls: type[StandardAgent]) -> type[StandardAgent]:
        name = agent_cls.agent_name()
        existing = self._agents.get(name)
        if existing is not None and existing is not agent_cls and existing.__qualname__ != agent_cls.__qualname__:
            raise ValueError(f"an agent named {name!r} is already registered ({existing.__qualname__})")
        self._agents[name] = agent_cls  # the same class re-imported (module reload) replaces itself
        return agent_cls

    def get(self, name: str) -> type[StandardAgent] | None:
        return self._agents.get(name)

    def schema_version(self, name: str) -> str | None:
        agent_cls = self._agents.get(name)
        return schema_version(agent_cls) if agent_cls is not None else None

    def names(self) -> list[str]:
        return sorted(self._agents)


agent_registry = AgentRegistry()


def valet(cls: type[StandardAgent] | None = None, *, name: str | None = None, expose_as_tool: bool = True,
          agents: AgentRegistry | None = None, tools: Any = None) -> Any:
    """Register an agent: ``@valet`` or ``@valet(name=..., expose_as_tool=False)``.

    An exposed agent also becomes an agent-tool in the tool registry (``tools``, by default
    the process-wide one), so the LLM sees it beside plain tools.
    """

    def wrap(agent_cls: type[StandardAgent]) -> type[StandardAgent]:
        if not (inspect.isclass(agent_cls) and issubclass(agent_cls, StandardAgent)):
            raise TypeError("@valet decorates StandardAgent subclasses")
        if name:
            agent_cls.name = name
        agent_cls.expose_as_tool = expose_as_tool
        (agents if agents is not None else agent_registry).register(agent_cls)
        if expose_as_tool:
            from orchestrator.agent_tools import AgentTool
            from orchestrator.tools import registry as default_tools

            target = tools if tools is not None else default_tools
            existing = target.get(agent_cls.agent_name())
            if isinstance(existing, AgentTool) and existing.agent_cls.__qualname__ == agent_cls.__qualname__:
                target.unregister(agent_cls.agent_name())  # a re-imported class replaces its old adapter
            target.register(AgentTool(agent_cls))
        return agent_cls

    return wrap(cls) if cls is not None else wrap
