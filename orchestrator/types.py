"""Value types shared by the loop, its callers and its telemetry. No Django, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(slots=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: TokenUsage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens

    def as_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "total": self.total}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the LLM asked for; ``arguments`` is the raw JSON string it sent."""

    id: str
    name: str
    arguments: str


@dataclass(slots=True)
class LLMResponse:
    content: str
    tool_calls: list[ToolCall]
    usage: TokenUsage
    finish_reason: str | None = None


class RunStatus(StrEnum):
    COMPLETED = "completed"
    WAITING_FOR_INPUT = "waiting_for_input"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    REFUSED = "refused"
    FAILED = "failed"


@dataclass(slots=True)
class ToolOutcome:
    """What running one tool call produced.

    ``status`` is set by agent-tools (COMPLETED / WAITING_FOR_INPUT / WAITING_FOR_APPROVAL /
    ERROR); a waiting outcome carries ``interruption`` and stops the loop.
    """

    content: str
    is_error: bool = False
    status: str | None = None
    interruption: Interruption | None = None


@dataclass(slots=True)
class Interruption:
    """An agent-tool needs the user: the loop stops and ``prompt`` goes back to them."""

    status: RunStatus  # WAITING_FOR_INPUT or WAITING_FOR_APPROVAL
    prompt: str
    tool_call_id: str = ""
    agent_name: str = ""
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ToolCallRecord:
    """Per-call telemetry, recorded by the loop for every tool and agent-tool call."""

    tool_call_id: str
    name: str
    args_summary: dict[str, Any]
    duration_ms: int
    success: bool
    result_status: str | None
    result_chars: int
    turn: int
    token_attribution: TokenUsage | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "args_summary": self.args_summary,
            "duration_ms": self.duration_ms,
            "success": self.success,
            "result_status": self.result_status,
            "result_chars": self.result_chars,
            "turn": self.turn,
            "token_attribution": self.token_attribution.as_dict() if self.token_attribution else None,
        }


@dataclass(slots=True)
class TurnRecord:
    """The transcript of one LLM call, persisted as a ``LoopTurn``."""

    index: int
    input_messages: int
    input_chars: int
    output_text: str = ""
    usage: TokenUsage = field(default_factory=TokenUsage)
    llm_duration_ms: int = 0
    recovery_steps: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ReactLoopResult:
    response: str
    turns: int
    tool_calls: list[ToolCallRecord]
    token_usage: TokenUsage
    duration_ms: int
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    status: RunStatus = RunStatus.COMPLETED
    new_messages: list[dict[str, Any]] = field(default_factory=list)  # OpenAI-format, this run only
    turn_records: list[TurnRecord] = field(default_factory=list)
    interruption: Interruption | None = None
    error: str = ""

    def summary(self) -> dict[str, Any]:
        return {
            "status": str(self.status),
            "response": self.response,
            "turns": self.turns,
            "tool_calls": [record.as_dict() for record in self.tool_calls],
            "token_usage": self.token_usage.as_dict(),
            "duration_ms": self.duration_ms,
            "pending_approvals": self.pending_approvals,
        }
