"""Tools every OneValet has: the time anywhere, and exact arithmetic.

LLMs guess at dates and sums; these two answer exactly and cost nothing.
"""

from __future__ import annotations

import ast
import operator
import zoneinfo
from datetime import datetime

from orchestrator.tools import ToolExecutionContext, tool

_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.USub: operator.neg, ast.UAdd: operator.pos,
}
MAX_EXPONENT = 1000


@tool
def current_time(context: ToolExecutionContext, timezone: str | None = None) -> str:
    """The current date and time, in the user's time zone or another one.

    Args:
        timezone: An IANA time zone such as "Asia/Tokyo"; the user's own when omitted.
    """
    name = timezone or context.timezone
    try:
        tz = zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}; use an IANA name like Europe/Paris") from None
    now = datetime.now(tz)
    return f"{now:%A %d %B %Y, %H:%M:%S} in {name} (UTC{now:%z})"


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError("only numbers and + - * / // % ** and parentheses are allowed")


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression exactly, e.g. "(1299 * 0.85) / 3".

    Args:
        expression: Numbers with + - * / // % ** and parentheses.
    """
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    try:
        value = _evaluate(tree)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    return f"{expression} = {value:g}" if isinstance(value, float) else f"{expression} = {value}"
