"""Tools registered in the daphne server the surface tests start (``ONEVALET_TOOL_MODULES``)."""

from __future__ import annotations

from orchestrator.tools import tool


@tool
async def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather for a city.

    Args:
        city: The city, e.g. Paris.
        unit: celsius or fahrenheit.
    """
    return f"Sunny, 21 degrees {unit} in {city}"
