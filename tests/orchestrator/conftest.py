"""Tools for the loop tests; the ``make_orchestrator`` fixture lives in ``tests/conftest.py``."""

from __future__ import annotations

import asyncio
import time

from orchestrator.tools import ToolExecutionContext, ToolRegistry, tool


def build_test_tools() -> ToolRegistry:
    """Tools whose behaviour the tests control: sleeping, failing, hanging, echoing context."""
    tools = ToolRegistry()

    @tool(register_in=tools)
    async def get_weather(city: str, unit: str = "celsius") -> str:
        """Current weather for a city.

        Args:
            city: The city, e.g. Paris.
            unit: celsius or fahrenheit.
        """
        return f"Sunny, 21 degrees {unit} in {city}"

    @tool(register_in=tools)
    async def slow_lookup(key: str) -> str:
        """Look something up slowly (0.3 s).

        Args:
            key: What to look up.
        """
        await asyncio.sleep(0.3)
        return f"value of {key}"

    @tool(register_in=tools)
    def blocking_lookup(key: str) -> str:
        """A sync tool that blocks its thread for 0.3 s.

        Args:
            key: What to look up.
        """
        time.sleep(0.3)
        return f"blocking value of {key}"

    @tool(register_in=tools)
    def explode(reason: str) -> str:
        """Always fails.

        Args:
            reason: Why.
        """
        raise RuntimeError(f"kaboom: {reason}")

    @tool(register_in=tools)
    async def never_returns() -> str:
        """Hangs forever."""
        await asyncio.Event().wait()
        return ""

    @tool(register_in=tools)
    def big_result(size: int) -> str:
        """Returns ``size`` characters in lines.

        Args:
            size: How many characters.
        """
        line = "x" * 99 + "\n"
        return (line * (size // 100 + 1))[:size]

    @tool(register_in=tools)
    def whoami(context: ToolExecutionContext) -> str:
        """Who is asking."""
        return f"tenant={context.tenant_id} conversation={context.conversation_id} tz={context.timezone}"

    return tools
