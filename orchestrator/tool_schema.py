"""JSON schema from Python type hints, and validation of the LLM's arguments against it.

Supported: str, int, float, bool, list[...], dict, Literal[...], Optional / ``X | None``,
Enum subclasses, and defaults (a parameter with a default is not required). Arguments
are checked before a tool runs, so a wrong type becomes an error result the LLM can fix
rather than an exception deep in the tool.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


class ArgumentError(ValueError):
    """The LLM's arguments do not match the tool's schema; the message tells it what to fix."""


def strip_optional(annotation: Any) -> tuple[Any, bool]:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def json_type(annotation: Any) -> dict[str, Any]:
    """The JSON-schema fragment describing one annotation (without description)."""
    annotation, nullable = strip_optional(annotation)
    schema: dict[str, Any]
    origin = get_origin(annotation)
    if annotation in _SIMPLE:
        schema = {"type": _SIMPLE[annotation]}
    elif origin is Literal:
        values = list(get_args(annotation))
        schema = {"type": _SIMPLE.get(type(values[0]), "string"), "enum": values}
    elif inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        values = [member.value for member in annotation]
        schema = {"type": _SIMPLE.get(type(values[0]), "string"), "enum": values}
    elif origin in (list, typing.List, tuple, set):  # noqa: UP006 - typing.List still appears in user code
        item_args = get_args(annotation)
        schema = {"type": "array"}
        if item_args:
            schema["items"] = json_type(item_args[0])
    elif origin in (dict, typing.Dict):  # noqa: UP006
        schema = {"type": "object"}
    elif annotation is Any or annotation is inspect.Parameter.empty:
        schema = {}
    else:
        raise TypeError(f"unsupported tool parameter type {annotation!r}")
    if nullable and "type" in schema:
        schema = {**schema, "type": [schema["type"], "null"]}
    return schema


def schema_for_parameter(annotation: Any, description: str, default: Any) -> dict[str, Any]:
    schema = json_type(annotation)
    if description:
        schema["description"] = description
    if default is not inspect.Parameter.empty and default is not None:
        schema["default"] = default.value if isinstance(default, enum.Enum) else default
    return schema


def _check(value: Any, annotation: Any, where: str) -> Any:
    """Validate ``value`` against ``annotation``; return it converted (Enum members)."""
    annotation, nullable = strip_optional(annotation)
    if value is None:
        if nullable:
            return None
        raise ArgumentError(f"{where} must not be null")
    origin = get_origin(annotation)
    if annotation is Any:
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ArgumentError(f"{where} must be a boolean, got {type(value).__name__}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ArgumentError(f"{where} must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ArgumentError(f"{where} must be a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ArgumentError(f"{where} must be a string, got {type(value).__name__}")
        return value
    if origin is Literal:
        if value not in get_args(annotation):
            raise ArgumentError(f"{where} must be one of {list(get_args(annotation))}, got {value!r}")
        return value
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        try:
            return annotation(value)
        except ValueError:
            raise ArgumentError(f"{where} must be one of {[m.value for m in annotation]}, got {value!r}") from None
    if annotation is list or origin in (list, typing.List, tuple, set):  # noqa: UP006
        if not isinstance(value, list):
            raise ArgumentError(f"{where} must be an array, got {type(value).__name__}")
        item_args = get_args(annotation)
        if item_args:
            return [_check(item, item_args[0], f"{where}[{i}]") for i, item in enumerate(value)]
        return value
    if annotation is dict or origin in (dict, typing.Dict):  # noqa: UP006
        if not isinstance(value, dict):
            raise ArgumentError(f"{where} must be an object, got {type(value).__name__}")
        return value
    return value


def coerce_arguments(params: dict[str, tuple[Any, Any]], arguments: dict[str, Any]) -> dict[str, Any]:
    """Check the LLM's arguments against the declared parameters; fill defaults."""
    if not isinstance(arguments, dict):
        raise ArgumentError("arguments must be a JSON object")
    unknown = sorted(set(arguments) - set(params))
    if unknown:
        raise ArgumentError(f"unknown argument(s) {', '.join(unknown)}; expected {', '.join(params) or 'none'}")
    result: dict[str, Any] = {}
    missing = []
    for name, (annotation, default) in params.items():
        if name in arguments:
            result[name] = _check(arguments[name], annotation, name)
        elif default is inspect.Parameter.empty:
            missing.append(name)
    if missing:
        raise ArgumentError(f"missing required argument(s): {', '.join(missing)}")
    return result
