"""``ReactLoopConfig``: every knob of the ReAct loop, in one place.

Other modules read limits from a config instance, never from literals, so the implicit
dependencies between numbers (trim threshold vs. context limit, per-result share vs. hard
cap) are visible here. Operators override any field with ``ONEVALET_LOOP`` (JSON).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from onevalet_site.env import ConfigError


@dataclass(frozen=True, slots=True)
class ReactLoopConfig:
    # Loop control
    max_turns: int = 10
    max_input_chars: int = 16_000  # a user message longer than this is refused before any LLM call

    # Tool execution
    tool_execution_timeout: float = 30.0
    agent_tool_execution_timeout: float = 120.0  # agents may collect fields, call APIs, ask an LLM
    tool_thread_pool_size: int = 32  # sync tools run here; enough that blocking tools never queue
    max_tool_result_share: float = 0.3  # one result may fill at most this share of the context
    max_tool_result_chars: int = 400_000  # hard cap, whatever the context size
    args_summary_chars: int = 200  # per argument, in telemetry (ToolCallRecord.args_summary)

    # Context management
    context_token_limit: int = 128_000
    context_trim_threshold: float = 0.8  # trim history once the estimate passes this share
    max_history_messages: int = 40  # non-system messages kept by a trim
    force_trim_keep_messages: int = 5  # last-resort overflow recovery keeps this many
    overflow_tool_result_chars: int = 2_000  # overflow step 2 cuts every tool result to this
    chars_per_token: float = 4.0  # starting estimate, corrected by the API's prompt token counts
    history_load_limit: int = 200  # stored messages loaded into a new run at most

    # LLM calls
    llm_max_retries: int = 2  # rate-limit retries (429), exponential backoff
    llm_retry_base_delay: float = 1.0
    llm_retry_max_delay: float = 30.0
    llm_transient_retries: int = 1  # timeouts / connection errors: retry once
    max_output_tokens: int | None = None

    # Approvals and paused agents
    approval_timeout_minutes: int = 30
    agent_pool_ttl_minutes: int = 60  # a paused agent nobody answers is dropped after this long
    max_agents_per_tenant: int = 10  # paused agents one user may have at once, across conversations
    # A reply to an agent waiting for input is first routed by one small LLM call (answer /
    # new request / cancel; see orchestrator.reply_routing). Off: every reply is an answer.
    route_agent_replies: bool = True
    # A waiting agent's raw question ("Please provide: subject") is rephrased by one extra
    # LLM call without tools, so the user hears the persona's voice (issue 5). Off: the raw
    # question is the answer and no extra call is made.
    phrase_agent_questions: bool = True

    @classmethod
    def from_settings(cls, overrides: dict[str, Any] | None = None) -> ReactLoopConfig:
        """Defaults, then ``settings.ONEVALET_LOOP``, then ``overrides`` (tests, callers)."""
        from django.conf import settings

        merged = {**getattr(settings, "ONEVALET_LOOP", {}), **(overrides or {})}
        return cls.from_mapping(merged)

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> ReactLoopConfig:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigError("ONEVALET_LOOP", f"unknown field(s) {', '.join(unknown)}; known: {', '.join(fields)}")
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        problems = []
        if self.max_turns < 1:
            problems.append("max_turns must be at least 1")
        if not 0 < self.max_tool_result_share <= 1:
            problems.append("max_tool_result_share must be in (0, 1]")
        if not 0 < self.context_trim_threshold <= 1:
            problems.append("context_trim_threshold must be in (0, 1]")
        if self.force_trim_keep_messages < 1 or self.max_history_messages < self.force_trim_keep_messages:
            problems.append("need 1 <= force_trim_keep_messages <= max_history_messages")
        if self.tool_execution_timeout <= 0 or self.agent_tool_execution_timeout <= 0:
            problems.append("tool timeouts must be positive")
        if self.agent_pool_ttl_minutes < 1 or self.max_agents_per_tenant < 1:
            problems.append("agent_pool_ttl_minutes and max_agents_per_tenant must be at least 1")
        if self.chars_per_token <= 0:
            problems.append("chars_per_token must be positive")
        if problems:
            raise ConfigError("ONEVALET_LOOP", "; ".join(problems))

    def replace(self, **changes: Any) -> ReactLoopConfig:
        config = dataclasses.replace(self, **changes)
        config.validate()
        return config
