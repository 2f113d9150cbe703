"""What a reply to a waiting agent means: an answer, a new request, or a cancellation.

While an agent waits for input, the user's next message goes to it first. The user may
answer, but may also change the subject ("what's the weather in Rome?") or drop the task
in words no fixed phrase list covers. Validation cannot tell these apart: a free-text
field (a subject, a message body, a reminder's "what") accepts any text, so a new request
would be silently stored as the field's value. One small structured LLM call (a single
function tool, ``route_reply``) reads the agent's question, the fields it still needs and
the reply, and returns the intent — and, for an answer, the value of every asked field the
reply gives, so "send it to bob@x.org with subject Lunch" fills two fields at once.

The call is advisory: a failed or malformed routing answer means "treat it as an answer",
which is exactly the behaviour without routing, so the user never sees an error from it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from orchestrator.agents import InputField, StandardAgent
from orchestrator.tool_schema import json_type

logger = logging.getLogger("onevalet.agents")

TOOL_NAME = "route_reply"
ROUTER_PROMPT = (
    "A task is waiting for the user's answer to its question. Decide what the user's reply means and call "
    f"{TOOL_NAME} once. intent: 'answer' when the reply gives (or tries to give) what was asked, even partly, "
    "in other words or with a wrong value; 'cancel' when the user drops the task; 'new_request' when the reply "
    "ignores the question and asks or says something else. For 'answer', put in values every needed field the "
    "reply gives, copied verbatim from the user's words (never rephrased, never invented); leave out the rest.")


class ReplyIntent(StrEnum):
    ANSWER = "answer"
    NEW_REQUEST = "new_request"
    CANCEL = "cancel"


@dataclass(frozen=True, slots=True)
class RoutedReply:
    """The routing decision. Empty ``values`` with ANSWER means: let the agent parse the text."""

    intent: ReplyIntent
    values: dict[str, Any] = field(default_factory=dict)


FALLBACK = RoutedReply(ReplyIntent.ANSWER)
_INTENTS = tuple(str(intent) for intent in ReplyIntent)


def route_tool(asked: list[InputField]) -> dict[str, Any]:
    """The one function tool of the routing call; ``values`` lists only the asked fields."""
    properties = {spec.name: {**json_type(spec.type), "description": _field_help(spec)} for spec in asked}
    return {"type": "function", "function": {
        "name": TOOL_NAME, "description": "Record what the user's reply to the waiting task means.",
        "parameters": {"type": "object", "required": ["intent"], "properties": {
            "intent": {"type": "string", "enum": list(_INTENTS)},
            "values": {"type": "object", "properties": properties, "additionalProperties": False,
                       "description": "Only with intent 'answer': the needed fields the reply gives."}}}}}


def route_messages(agent: StandardAgent, asked: list[InputField], text: str) -> list[dict[str, Any]]:
    """System instructions, then the task, its question, the needed fields and the reply."""
    description = " ".join((type(agent).__doc__ or "").split())
    lines = [f"Task: {agent.agent_name()}" + (f" ({description})" if description else ""),
             f"It asked the user: {agent.question}", "Fields it still needs:"]
    lines += [f"- {spec.name}: {_field_help(spec)}" for spec in asked]
    lines.append(f"The user's reply: {text}")
    return [{"role": "system", "content": ROUTER_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


async def route_reply(agent: StandardAgent, text: str, llm: Any) -> RoutedReply:
    """One structured LLM call deciding what ``text`` means for the waiting ``agent``.

    Any failure (transport, no tool call, bad JSON, unknown intent) returns ``FALLBACK``:
    routing must never turn a reply into an error, and an answer is what the agent
    assumed before routing existed.
    """
    asked = agent.to_ask()
    if not asked:
        return FALLBACK
    try:
        response = await llm.complete(route_messages(agent, asked, text), [route_tool(asked)])
        calls = [call for call in response.tool_calls if call.name == TOOL_NAME]
        arguments = json.loads(calls[0].arguments) if calls else None
    except Exception:  # an unreadable routing answer is an answer, not an error for the user
        logger.warning("could not route a reply to %s; treating it as an answer", agent.agent_name(), exc_info=True)
        return FALLBACK
    return parse_route(arguments, asked)


def parse_route(arguments: Any, asked: list[InputField]) -> RoutedReply:
    """The tool call's arguments as a decision; anything malformed is ``FALLBACK``."""
    if not isinstance(arguments, dict) or arguments.get("intent") not in _INTENTS:
        logger.warning("malformed reply routing %r; treating the reply as an answer", arguments)
        return FALLBACK
    intent = ReplyIntent(arguments["intent"])
    raw = arguments.get("values") if intent == ReplyIntent.ANSWER else None
    names = {spec.name for spec in asked}
    values = {k: v for k, v in raw.items() if k in names and v not in (None, "")} if isinstance(raw, dict) else {}
    return RoutedReply(intent, values)


def _field_help(spec: InputField) -> str:
    text = spec.description or spec.label()
    if spec.validator_description:
        text = f"{text} ({spec.validator_description})"
    return text
