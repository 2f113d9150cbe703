"""``ContextManager``: every rule about what fits in the LLM's context lives here.

Three lines of defence (spec section 12): each tool result is cut before it is appended
(``truncate_tool_result``); history is trimmed before each LLM call when the estimate
passes the threshold (``trim_if_needed``); after a context-overflow error the recovery
chain escalates (``overflow_recovery_step``: trim → cut every tool result → keep only the
last few messages).

Token counts are estimated from characters, because tiktoken downloads its tables at run
time. The chars-per-token ratio starts at the config's value and is corrected each time
the API reports how many prompt tokens a request really used.

Messages are OpenAI chat dicts and are never mutated in place: a changed message is a new
dict. (The LLM client caches each message's serialised JSON by identity.)
"""

from __future__ import annotations

from typing import Any

from orchestrator.config import ReactLoopConfig

Message = dict[str, Any]

TRUNCATION_MARKER = "\n[...truncated: {removed} of {total} characters removed to fit the context]"
_PER_MESSAGE_OVERHEAD_CHARS = 16  # role, separators and the like


def message_chars(message: Message) -> int:
    chars = len(message.get("content") or "") + _PER_MESSAGE_OVERHEAD_CHARS
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        chars += len(function.get("name", "")) + len(function.get("arguments", "")) + _PER_MESSAGE_OVERHEAD_CHARS
    return chars


class ContextManager:
    """Owns token estimation, truncation and trimming for one run."""

    OVERFLOW_STEPS = ("trim_history", "truncate_tool_results", "force_trim")

    def __init__(self, config: ReactLoopConfig) -> None:
        self.config = config
        self.chars_per_token = config.chars_per_token

    # --- estimation ---------------------------------------------------------------------
    def estimate_tokens(self, messages: list[Message], extra_chars: int = 0) -> int:
        chars = sum(message_chars(m) for m in messages) + extra_chars
        return int(chars / self.chars_per_token) + 1

    def observe_usage(self, prompt_chars: int, prompt_tokens: int) -> None:
        """Correct the ratio from what the API counted (smoothed, so one odd reply can't swing it)."""
        if prompt_tokens <= 0 or prompt_chars <= 0:
            return
        observed = prompt_chars / prompt_tokens
        self.chars_per_token = 0.5 * self.chars_per_token + 0.5 * observed

    @property
    def trim_budget_tokens(self) -> int:
        return int(self.config.context_token_limit * self.config.context_trim_threshold)

    # --- defence 1: one tool result --------------------------------------------------------
    def max_tool_result_chars(self) -> int:
        share_tokens = self.config.context_token_limit * self.config.max_tool_result_share
        return min(int(share_tokens * self.chars_per_token), self.config.max_tool_result_chars)

    def truncate_tool_result(self, result: str, max_chars: int | None = None) -> str:
        """Cut ``result`` to the limit, at a newline when that keeps more than half, with a marker."""
        limit = self.max_tool_result_chars() if max_chars is None else max_chars
        if len(result) <= limit:
            return result
        cut = result[:limit]
        newline = cut.rfind("\n")
        if newline > limit // 2:
            cut = cut[:newline]
        return cut + TRUNCATION_MARKER.format(removed=len(result) - len(cut), total=len(result))

    # --- defence 2: history ----------------------------------------------------------------
    def trim_if_needed(self, messages: list[Message], tools_chars: int = 0) -> list[Message]:
        """Drop the oldest history when over the trim threshold; keep tool-call pairs whole."""
        if self.estimate_tokens(messages, tools_chars) <= self.trim_budget_tokens:
            return messages
        system, rest = _split_system(messages)
        kept = _drop_orphans(rest[-self.config.max_history_messages:])
        # Still too big: drop whole groups (a user message, or an assistant message with
        # its tool results) from the front, keeping at least the newest group.
        groups = _groups(kept)
        while len(groups) > 1 and self.estimate_tokens(system + _flatten(groups), tools_chars) > self.trim_budget_tokens:
            groups.pop(0)
        return system + _flatten(groups)

    # --- defence 3: after an overflow error ---------------------------------------------
    def truncate_all_tool_results(self, messages: list[Message]) -> list[Message]:
        limit = self.config.overflow_tool_result_chars
        return [
            {**m, "content": self.truncate_tool_result(m["content"], limit)}
            if m.get("role") == "tool" and len(m.get("content") or "") > limit else m
            for m in messages
        ]

    def force_trim(self, messages: list[Message]) -> list[Message]:
        system, rest = _split_system(messages)
        return system + _drop_orphans(rest[-self.config.force_trim_keep_messages:])

    def overflow_recovery_step(self, step: int, messages: list[Message]) -> list[Message]:
        """Apply recovery step ``step`` (0-based, see OVERFLOW_STEPS) after a context overflow."""
        name = self.OVERFLOW_STEPS[step]
        if name == "trim_history":
            system, rest = _split_system(messages)
            return system + _drop_orphans(rest[-self.config.max_history_messages:])
        if name == "truncate_tool_results":
            return self.truncate_all_tool_results(messages)
        return self.force_trim(messages)


def _split_system(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    system = [m for m in messages if m.get("role") == "system"]
    rest = [m for m in messages if m.get("role") != "system"]
    return system, rest


def _drop_orphans(messages: list[Message]) -> list[Message]:
    """Remove tool results at the front whose assistant message was cut away.

    APIs reject a history that starts with a tool result (its call is gone), and an
    assistant message whose tool results are incomplete; cutting only ever happens at the
    front, so leading tool messages are the only orphans that can appear.
    """
    start = 0
    while start < len(messages) and messages[start].get("role") == "tool":
        start += 1
    return messages[start:]


def _groups(messages: list[Message]) -> list[list[Message]]:
    groups: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "tool" and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def _flatten(groups: list[list[Message]]) -> list[Message]:
    return [m for group in groups for m in group]
