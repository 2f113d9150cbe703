"""A small declarative filter language over event data — data, never code (no ``eval``).

A filter is a JSON object. Each key is a dotted path into the event data and each value is
either a plain value (equality) or an object of operators, all of which must hold::

    {"from": "amazon.com"}                              equality
    {"subject": {"contains": "shipped"}}                substring / list membership
    {"price": {"lt": 500, "gte": 10}}                   comparisons
    {"tag": {"in": ["a", "b"]}, "id": {"exists": true}}
    {"any": [{...}, {...}]}, {"all": [...]}, {"not": {...}}

Several keys in one object all must match. ``validate_filter`` checks a filter once when a
trigger is saved, so a typo is a 400 for the user instead of a trigger that never fires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onevalet_site.errors import InvalidInput

MAX_DEPTH = 8
_MISSING = object()


def _ordered(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    """Comparisons between unlike types (``"a" < 3``) are simply false, not an error."""

    def compare(actual: Any, expected: Any) -> bool:
        if actual is _MISSING or isinstance(actual, bool) != isinstance(expected, bool):
            return False
        try:
            return bool(op(actual, expected))
        except TypeError:
            return False

    return compare


def _contains(actual: Any, expected: Any) -> bool:
    if isinstance(actual, str):
        return isinstance(expected, str) and expected.lower() in actual.lower()
    if isinstance(actual, list | tuple):
        return expected in actual
    if isinstance(actual, dict):
        return expected in actual
    return False


OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda actual, expected: actual is not _MISSING and actual == expected,
    "ne": lambda actual, expected: actual != expected,
    "contains": _contains,
    "gt": _ordered(lambda a, b: a > b),
    "gte": _ordered(lambda a, b: a >= b),
    "lt": _ordered(lambda a, b: a < b),
    "lte": _ordered(lambda a, b: a <= b),
    "in": lambda actual, expected: actual is not _MISSING and isinstance(expected, list) and actual in expected,
    "exists": lambda actual, expected: (actual is not _MISSING) == bool(expected),
}
COMBINATORS = ("all", "any", "not")


def lookup(data: Any, path: str) -> Any:
    """The value at a dotted path (list items by index), or ``_MISSING``."""
    current = data
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def compare(value: Any, op: str, expected: Any) -> bool:
    """One operator applied to a value: shared with condition triggers' comparisons."""
    if op not in OPERATORS:
        raise InvalidInput(f"unknown operator {op!r}; use one of {', '.join(OPERATORS)}", code="invalid_filter")
    return OPERATORS[op](value, expected)


def matches(spec: dict[str, Any] | None, data: Any) -> bool:
    """True when ``data`` satisfies the filter; an empty filter matches everything."""
    if not spec:
        return True
    for key, expected in spec.items():
        if key == "all":
            ok = all(matches(item, data) for item in expected)
        elif key == "any":
            ok = any(matches(item, data) for item in expected)
        elif key == "not":
            ok = not matches(expected, data)
        else:
            actual = lookup(data, key)
            if isinstance(expected, dict) and expected and set(expected) <= set(OPERATORS):
                ok = all(OPERATORS[op](actual, value) for op, value in expected.items())
            else:
                ok = actual is not _MISSING and actual == expected
        if not ok:
            return False
    return True


def validate_filter(spec: Any, depth: int = 0) -> None:
    """Raise ``InvalidInput`` naming what is wrong; accept exactly what ``matches`` understands."""
    if depth > MAX_DEPTH:
        raise InvalidInput("the filter is nested too deeply", code="invalid_filter")
    if not isinstance(spec, dict):
        raise InvalidInput("a filter must be a JSON object", code="invalid_filter")
    for key, expected in spec.items():
        if key in ("all", "any"):
            if not isinstance(expected, list) or not expected:
                raise InvalidInput(f'"{key}" takes a non-empty list of filters', code="invalid_filter")
            for item in expected:
                validate_filter(item, depth + 1)
        elif key == "not":
            validate_filter(expected, depth + 1)
        elif not key or key.startswith(".") or key.endswith("."):
            raise InvalidInput(f"{key!r} is not a field path", code="invalid_filter")
        elif isinstance(expected, dict) and expected:
            unknown = set(expected) - set(OPERATORS)
            if unknown and unknown != set(expected):
                raise InvalidInput(f"unknown operator(s) {', '.join(sorted(unknown))} for {key!r}; "
                                   f"use {', '.join(OPERATORS)}", code="invalid_filter")
            if "in" in expected and not isinstance(expected["in"], list):
                raise InvalidInput(f'"in" for {key!r} takes a list', code="invalid_filter")
