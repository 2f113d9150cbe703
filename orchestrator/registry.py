"""Loading the modules that define tools and agents (``ONEVALET_TOOL_MODULES``).

Importing a module runs its ``@tool`` / ``@valet`` decorators, which register into the
process-wide registry. Loading is idempotent and lazy, so importing the orchestrator does
not import every integration.
"""

from __future__ import annotations

import importlib

from django.conf import settings

from onevalet_site.env import ConfigError

_loaded: set[str] = set()


def load_tool_modules() -> None:
    for module in settings.ONEVALET_TOOL_MODULES:
        if module in _loaded:
            continue
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError("ONEVALET_TOOL_MODULES", f"cannot import {module!r} ({exc})") from None
        _loaded.add(module)
