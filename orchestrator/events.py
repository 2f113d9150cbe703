"""Typed events a run emits while it happens (spec section 10).

Each event is a small frozen dataclass with a fixed ``type``; ``as_dict()`` is the JSON
the websocket, the terminal chat and the event store all share. An ``EventSink`` is any
async callable taking an event; the loop awaits it, so a slow sink applies back-pressure
instead of growing an unbounded buffer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class LoopEvent:
    type: ClassVar[str] = "event"

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True, slots=True)
class MessageStart(LoopEvent):
    type: ClassVar[str] = "message_start"
    run: str
    turn: int


@dataclass(frozen=True, slots=True)
class MessageChunk(LoopEvent):
    type: ClassVar[str] = "message_chunk"
    run: str
    turn: int
    delta: str


@dataclass(frozen=True, slots=True)
class MessageEnd(LoopEvent):
    type: ClassVar[str] = "message_end"
    run: str
    turn: int
    content: str
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class ToolCallStart(LoopEvent):
    type: ClassVar[str] = "tool_call_start"
    run: str
    turn: int
    tool_call_id: str
    name: str
    args_summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResultEvent(LoopEvent):
    type: ClassVar[str] = "tool_result"
    run: str
    turn: int
    tool_call_id: str
    name: str
    success: bool
    duration_ms: int
    result_status: str | None
    preview: str


@dataclass(frozen=True, slots=True)
class StateChange(LoopEvent):
    type: ClassVar[str] = "state_change"
    run: str
    state: str
    prompt: str
    agent: str = ""
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ExecutionEnd(LoopEvent):
    type: ClassVar[str] = "execution_end"
    run: str
    conversation: str
    summary: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ErrorEvent(LoopEvent):
    type: ClassVar[str] = "error"
    code: str
    message: str
    run: str = ""


EventSink = Callable[[LoopEvent], Awaitable[None]]


async def discard(event: LoopEvent) -> None:
    """The sink of a caller that does not watch the run."""
