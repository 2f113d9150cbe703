"""Condition checks: named functions that measure something, compared declaratively.

A condition trigger stores ``{"check": "<name>", "params": {...}, "op": "lt", "value": 500}``.
The poller calls the registered function with the owner and params, compares its result
with ``op``/``value`` (the same operators as event filters) and fires on the false -> true
edge only. Checks are plain functions registered by name, so an integration adds one with
``@condition_check("flight_price")`` and no code is ever read from the database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onevalet_site.errors import InvalidInput
from triggers.filters import OPERATORS, compare

ConditionCheck = Callable[[int, dict[str, Any]], Any]

_checks: dict[str, ConditionCheck] = {}


def condition_check(name: str) -> Callable[[ConditionCheck], ConditionCheck]:
    """Register ``func(owner_id, params) -> value`` under ``name``."""

    def register(func: ConditionCheck) -> ConditionCheck:
        _checks[name] = func
        return func

    return register


def unregister(name: str) -> None:
    _checks.pop(name, None)


def check_names() -> list[str]:
    return sorted(_checks)


def validate_condition(spec: Any) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise InvalidInput("a condition must be an object {check, params, op, value}", code="invalid_condition")
    if spec.get("check") not in _checks:
        raise InvalidInput(f"unknown condition check {spec.get('check')!r}; known: {', '.join(check_names())}",
                           code="invalid_condition")
    if spec.get("op", "eq") not in OPERATORS:
        raise InvalidInput(f"unknown operator {spec.get('op')!r}; use {', '.join(OPERATORS)}",
                           code="invalid_condition")
    if not isinstance(spec.get("params", {}), dict):
        raise InvalidInput('"params" must be an object', code="invalid_condition")
    return {"check": spec["check"], "params": spec.get("params", {}), "op": spec.get("op", "eq"),
            "value": spec.get("value", True)}


def evaluate(spec: dict[str, Any], owner_id: int) -> tuple[Any, bool]:
    """Run the check (slow I/O allowed: never call inside a transaction); return (value, state)."""
    func = _checks.get(spec.get("check", ""))
    if func is None:
        raise InvalidInput(f"unknown condition check {spec.get('check')!r}", code="invalid_condition")
    value = func(owner_id, dict(spec.get("params") or {}))
    return value, compare(value, spec.get("op", "eq"), spec.get("value", True))


def describe(spec: dict[str, Any], value: Any) -> str:
    """Words for the assistant: what was checked and what it measured."""
    params = ", ".join(f"{k}={v}" for k, v in (spec.get("params") or {}).items())
    return f"{spec.get('check')}({params}) = {value!r}, which is {spec.get('op', 'eq')} {spec.get('value')!r}"


@condition_check("unread_notifications")
def unread_notifications(owner_id: int, params: dict[str, Any]) -> int:
    """How many unread notifications the user has (e.g. "tell me when more than 10 pile up")."""
    from notifications.models import Notification

    return Notification.objects.filter(owner_id=owner_id, read_at__isnull=True).count()


@condition_check("stored_value")
def stored_value(owner_id: int, params: dict[str, Any]) -> Any:
    """A value an integration or script stored with ``triggers.conditions.store_value``.

    Lets anything that can reach the cache (a scraper, a price poller) feed a condition
    without shipping its own check: ``{"check": "stored_value", "params": {"key": "price"}}``.
    """
    from django.core.cache import cache

    return cache.get(_value_key(owner_id, str(params.get("key", ""))))


def store_value(owner_id: int, key: str, value: Any) -> None:
    from django.core.cache import cache

    cache.set(_value_key(owner_id, key), value, timeout=None)


def _value_key(owner_id: int, key: str) -> str:
    return f"triggers:value:{owner_id}:{key}"
