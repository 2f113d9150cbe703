"""ContextManager rules, without any I/O."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.config import ReactLoopConfig
from orchestrator.context import ContextManager

pytestmark = pytest.mark.smoke


def _manager(**config: Any) -> ContextManager:
    return ContextManager(ReactLoopConfig.from_mapping(config))


def _tool_round(i: int, size: int = 10) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"q{i}"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}a", "type": "function", "function": {"name": "t", "arguments": "{}"}},
            {"id": f"c{i}b", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": f"c{i}a", "content": "r" * size},
        {"role": "tool", "tool_call_id": f"c{i}b", "content": "r" * size},
        {"role": "assistant", "content": f"a{i}"},
    ]


def test_truncation_limit_is_the_share_of_the_context_or_the_hard_cap() -> None:
    manager = _manager(context_token_limit=10_000, max_tool_result_share=0.3, chars_per_token=4.0)
    assert manager.max_tool_result_chars() == 12_000
    capped = _manager(context_token_limit=1_000_000, max_tool_result_share=0.5, max_tool_result_chars=1000)
    assert capped.max_tool_result_chars() == 1000


def test_truncation_cuts_at_a_newline_when_that_keeps_more_than_half() -> None:
    manager = _manager()
    text = "a" * 60 + "\n" + "b" * 60
    cut = manager.truncate_tool_result(text, 100)
    assert cut.startswith("a" * 60 + "\n[...truncated: 61 of 121")
    no_good_newline = "a" * 10 + "\n" + "b" * 200
    cut = manager.truncate_tool_result(no_good_newline, 100)
    assert cut.split("\n[...truncated")[0] == no_good_newline[:100]
    assert manager.truncate_tool_result("short", 100) == "short"


def test_trim_keeps_system_and_never_starts_with_an_orphan_tool_result() -> None:
    manager = _manager(context_token_limit=200, context_trim_threshold=0.5, max_history_messages=7)
    messages = [{"role": "system", "content": "persona"}]
    for i in range(6):
        messages += _tool_round(i)
    messages.append({"role": "user", "content": "latest"})
    trimmed = manager.trim_if_needed(messages)
    assert trimmed[0] == {"role": "system", "content": "persona"}
    assert trimmed[1]["role"] != "tool"
    assert trimmed[-1] == {"role": "user", "content": "latest"}
    _assert_pairs_complete(trimmed)


@pytest.mark.parametrize("keep", range(1, 12))
def test_every_cut_point_leaves_a_valid_history(keep: int) -> None:
    manager = _manager(max_history_messages=max(keep, 1), force_trim_keep_messages=1)
    messages = [{"role": "system", "content": "s"}] + _tool_round(1) + _tool_round(2)
    for trimmed in (manager.overflow_recovery_step(0, messages), manager.force_trim(messages)):
        _assert_pairs_complete(trimmed)


def test_trim_below_threshold_returns_the_same_list() -> None:
    manager = _manager()
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert manager.trim_if_needed(messages) is messages


def test_trim_drops_whole_groups_until_under_budget() -> None:
    manager = _manager(context_token_limit=400, context_trim_threshold=1.0, max_history_messages=40)
    messages = [{"role": "system", "content": "s"}]
    for i in range(5):
        messages += _tool_round(i, size=200)
    trimmed = manager.trim_if_needed(messages)
    assert manager.estimate_tokens(trimmed) <= 400
    _assert_pairs_complete(trimmed)


def test_usage_reports_correct_the_estimate() -> None:
    manager = _manager(chars_per_token=4.0)
    manager.observe_usage(prompt_chars=3000, prompt_tokens=1000)
    assert manager.chars_per_token == pytest.approx(3.5)


def _assert_pairs_complete(messages: list[dict[str, Any]]) -> None:
    """Every tool result follows its assistant call, and every call has its result."""
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"orphan tool result in {messages}"
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls, f"tool calls without results in {messages}"
            open_calls = {c["id"] for c in message.get("tool_calls", ())}
    assert not open_calls
