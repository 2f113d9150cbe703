"""Plain tools: ``@tool`` turns a typed function into something the LLM can call.

The JSON schema comes from the signature and the docstring, so adding a capability is
writing one function. A ``ToolExecutionContext`` parameter is injected by the loop and
hidden from the schema. Sync functions run on a dedicated thread pool sized by
``ReactLoopConfig.tool_thread_pool_size``: asyncio's default executor has ``cpu + 4``
threads, which on a small box would quietly serialise blocking tools.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, get_type_hints

from orchestrator.tool_schema import ArgumentError, strip_optional, coerce_arguments, schema_for_parameter
from orchestrator.types import ToolOutcome


@dataclass(slots=True)
class ToolExecutionContext:
    """What a tool may know about the call it serves. Built by the orchestrator per run."""

    tenant_id: int
    conversation_id: str
    run_id: str
    timezone: str = "UTC"
    source: str = "web"
    tool_call_id: str = ""
    credentials: Any = None  # credentials.store.CredentialStore
    extra: dict[str, Any] = field(default_factory=dict)

    def for_call(self, tool_call_id: str) -> ToolExecutionContext:
        return ToolExecutionContext(
            tenant_id=self.tenant_id,
            conversation_id=self.conversation_id,
            run_id=self.run_id,
            timezone=self.timezone,
            source=self.source,
            tool_call_id=tool_call_id,
            credentials=self.credentials,
            extra=self.extra,
        )


class Tool(Protocol):
    """Anything the loop can offer the LLM: plain function tools and agent-tools alike."""

    name: str
    is_agent: bool

    def schema(self) -> dict[str, Any]: ...

    async def invoke(self, arguments: dict[str, Any], context: ToolExecutionContext) -> ToolOutcome: ...


_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_ARG_LINE = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary and per-argument descriptions of a Google-style docstring.

    Only the ``Args:`` section is read; other sections (``Returns:``...) are left out of
    the description so the LLM sees what the tool does and what each argument means.
    """
    summary: list[str] = []
    params: dict[str, str] = {}
    section = ""
    current = ""
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line)
        if header and not line.startswith(" "):
            section = header.group(1).lower()
            continue
        if not section:
            summary.append(line)
        elif section in {"args", "arguments", "parameters"}:
            stripped = line.strip()
            indent = len(line) - len(line.lstrip())
            match = _ARG_LINE.match(stripped)
            if match and indent <= 4:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(summary).strip(), params


_shared_executor: ThreadPoolExecutor | None = None


def tool_executor(size: int) -> ThreadPoolExecutor:
    """The process-wide pool for sync tools (created on first use, sized by the config)."""
    global _shared_executor
    if _shared_executor is None:
        _shared_executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="onevalet-tool")
    return _shared_executor


class FunctionTool:
    """A plain function exposed to the LLM."""

    is_agent = False

    def __init__(self, func: Callable[..., Any], *, name: str | None = None, description: str | None = None) -> None:
        self.func = func
        self.name = name or func.__name__
        self.is_async = inspect.iscoroutinefunction(func)
        summary, param_docs = _parse_docstring(func.__doc__ or "")
        self.description = description or summary or self.name.replace("_", " ")
        hints = get_type_hints(func)
        self.context_param: str | None = None
        self._params: dict[str, tuple[Any, Any]] = {}  # name -> (annotation, default)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in inspect.signature(func).parameters.values():
            annotation = hints.get(param.name, str)
            if strip_optional(annotation)[0] is ToolExecutionContext:
                self.context_param = param.name
                continue
            default = param.default
            properties[param.name] = schema_for_parameter(annotation, param_docs.get(param.name, ""), default)
            self._params[param.name] = (annotation, default)
            if default is inspect.Parameter.empty:
                required.append(param.name)
        self._schema = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": properties, "required": required,
                               "additionalProperties": False},
            },
        }

    def schema(self) -> dict[str, Any]:
        return self._schema

    async def invoke(self, arguments: dict[str, Any], context: ToolExecutionContext) -> ToolOutcome:
        kwargs = coerce_arguments(self._params, arguments)
        if self.context_param:
            kwargs[self.context_param] = context
        if self.is_async:
            result = await self.func(**kwargs)
        else:
            loop = asyncio.get_running_loop()
            call = functools.partial(contextvars.copy_context().run, self.func, **kwargs)
            size = context.extra.get("thread_pool_size", 32)
            result = await loop.run_in_executor(tool_executor(size), call)
        return ToolOutcome(content=render_result(result))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name}>"


def render_result(result: Any) -> str:
    """What the LLM reads: strings as they are, anything else as JSON."""
    if isinstance(result, ToolOutcome):
        return result.content
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


class ToolRegistry:
    """Name -> tool. The process has one (``registry``); tests may build their own."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        existing = self._tools.get(tool.name)
        if existing is not None and existing is not tool:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def all(self) -> list[Tool]:
        return [self._tools[name] for name in sorted(self._tools)]

    def subset(self, names: list[str]) -> ToolRegistry:
        other = ToolRegistry()
        for name in names:
            other.register(self._tools[name])
        return other

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


registry = ToolRegistry()


def tool(func: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
         register_in: ToolRegistry | None = None) -> Any:
    """Register a function as a tool: ``@tool`` or ``@tool(name=..., description=...)``."""

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        function_tool = FunctionTool(f, name=name, description=description)
        (register_in if register_in is not None else registry).register(function_tool)
        return function_tool

    return wrap(func) if func is not None else wrap


__all__ = ["ArgumentError", "FunctionTool", "Tool", "ToolExecutionContext", "ToolRegistry", "registry", "tool"]
