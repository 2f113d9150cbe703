"""``@tool``: schemas from type hints and docstrings, argument checks, context injection."""

from __future__ import annotations

import asyncio
import enum
import re
import threading
from typing import Any, Literal

import pytest

from orchestrator.builtin_tools import calculate, current_time
from orchestrator.tool_schema import ArgumentError
from orchestrator.tools import ToolExecutionContext, ToolRegistry, tool

pytestmark = pytest.mark.smoke


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


def _context(**extra: Any) -> ToolExecutionContext:
    return ToolExecutionContext(tenant_id=7, conversation_id="conv", run_id="run", timezone="Europe/Paris", **extra)


def test_schema_from_type_hints_and_docstring() -> None:
    tools = ToolRegistry()

    @tool(register_in=tools)
    def plan_trip(city: str, days: int, budget: float, flexible: bool, stops: list[str], prefs: dict,
                  pace: Literal["slow", "fast"] = "slow", unit: Unit = Unit.CELSIUS, note: str | None = None,
                  context: ToolExecutionContext | None = None) -> str:
        """Plan a trip.

        Longer explanation that stays in the description.

        Args:
            city: Where to go,
                written in English.
            days: How long.

        Returns:
            A plan.
        """
        return "plan"

    function = plan_trip.schema()["function"]
    assert function["name"] == "plan_trip"
    assert function["description"] == "Plan a trip.\n\nLonger explanation that stays in the description."
    props = function["parameters"]["properties"]
    assert props["city"] == {"type": "string", "description": "Where to go, written in English."}
    assert props["days"]["type"] == "integer" and props["budget"]["type"] == "number"
    assert props["flexible"]["type"] == "boolean"
    assert props["stops"] == {"type": "array", "items": {"type": "string"}}
    assert props["prefs"] == {"type": "object"}
    assert props["pace"] == {"type": "string", "enum": ["slow", "fast"], "default": "slow"}
    assert props["unit"] == {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}
    assert props["note"] == {"type": ["string", "null"]}
    assert "context" not in props
    assert function["parameters"]["required"] == ["city", "days", "budget", "flexible", "stops", "prefs"]


def test_arguments_are_checked_and_converted() -> None:
    tools = ToolRegistry()
    seen: dict[str, Any] = {}

    @tool(register_in=tools)
    async def convert(value: float, unit: Unit = Unit.CELSIUS, count: int = 1) -> str:
        """Convert."""
        seen.update(value=value, unit=unit, count=count)
        return "ok"

    assert asyncio.run(convert.invoke({"value": 3, "unit": "fahrenheit"}, _context())).content == "ok"
    assert seen == {"value": 3.0, "unit": Unit.FAHRENHEIT, "count": 1}
    for bad, message in [({}, "missing required argument(s): value"), ({"value": "hot"}, "value must be a number"),
                         ({"value": 1, "unit": "kelvin"}, "unit must be one of"),
                         ({"value": 1, "count": True}, "count must be an integer"),
                         ({"value": 1, "extra": 2}, "unknown argument(s) extra")]:
        with pytest.raises(ArgumentError, match=re.escape(message)):
            asyncio.run(convert.invoke(bad, _context()))


def test_context_is_injected_and_sync_tools_run_off_the_event_loop() -> None:
    tools = ToolRegistry()

    @tool(register_in=tools)
    def where(context: ToolExecutionContext) -> dict:
        """Where am I."""
        return {"tenant": context.tenant_id, "call": context.tool_call_id, "thread": threading.current_thread().name}

    outcome = asyncio.run(where.invoke({}, _context().for_call("call_9")))
    assert '"tenant": 7' in outcome.content and '"call": "call_9"' in outcome.content
    assert "onevalet-tool" in outcome.content


def test_duplicate_names_are_refused() -> None:
    tools = ToolRegistry()
    tool(lambda: "a", name="same", register_in=tools)
    with pytest.raises(ValueError, match="already registered"):
        tool(lambda: "b", name="same", register_in=tools)


def test_builtin_tools() -> None:
    assert asyncio.run(calculate.invoke({"expression": "(1299 * 0.85) / 3"}, _context())).content == \
        "(1299 * 0.85) / 3 = 368.05"
    assert asyncio.run(calculate.invoke({"expression": "2 ** 10"}, _context())).content == "2 ** 10 = 1024"
    for bad in ["__import__('os')", "1/0", "9 ** 99999", "x + 1"]:
        with pytest.raises(ValueError):
            asyncio.run(calculate.invoke({"expression": bad}, _context()))
    assert "in Europe/Paris" in asyncio.run(current_time.invoke({}, _context())).content
    assert "in Asia/Tokyo (UTC+0900)" in asyncio.run(current_time.invoke({"timezone": "Asia/Tokyo"}, _context())).content
