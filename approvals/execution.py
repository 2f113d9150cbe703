"""Running a decided approval: claim it once, resume the agent, check the arguments, act.

The framework, not the agent or the LLM, decides whether the action runs: only a request
the user approved (or edited) through ``approval_decide`` can be claimed here, the claim is
a conditional UPDATE (at most one worker runs it), and the agent runs only if the hash of
the arguments it is about to use equals the hash of the arguments the user saw and
approved. Nothing here runs inside a transaction: agents send email, call APIs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from approvals import services
from approvals.models import ApprovalRequest
from orchestrator.agent_tools import agent_class_for
from orchestrator.agents import AgentResult, AgentStatus, StandardAgent
from orchestrator.config import ReactLoopConfig
from orchestrator.tools import ToolExecutionContext, ToolRegistry

logger = logging.getLogger("onevalet.approvals")
Outcome = ApprovalRequest.Outcome


@dataclass(slots=True)
class ExecutedAction:
    """One executed (or refused, or cancelled) request, as the tool call/result pair the LLM reads."""

    request_id: str
    run_id: str | None
    call_id: str
    agent_name: str
    arguments: dict[str, Any]
    content: str
    is_error: bool
    outcome: str


def call_id_for(request: ApprovalRequest) -> str:
    """The id of the tool call that carries the decided action back into the conversation."""
    return f"approval_{request.id.hex}"


def as_action(request: ApprovalRequest) -> ExecutedAction:
    """A finished request (row) as its tool call/result pair."""
    return ExecutedAction(request_id=str(request.id), run_id=str(request.run_id) if request.run_id else None,
                          call_id=call_id_for(request), agent_name=request.agent_name,
                          arguments=request.final_arguments or request.details, content=request.result,
                          is_error=request.outcome != Outcome.COMPLETED, outcome=request.outcome)


async def approval_execute(*, request_id: Any, tools: ToolRegistry, credentials: Any = None,
                           config: ReactLoopConfig | None = None) -> ExecutedAction | None:
    """Execute a decided request exactly once; None when it was not this caller's to run."""
    request = await sync_to_async(services.approval_execution_claim)(request_id=request_id)
    if request is None:
        return None
    config = config or ReactLoopConfig.from_settings()
    try:
        outcome, content = await _perform(request, tools=tools, credentials=credentials, config=config)
    except Exception as exc:  # recorded, never retried: the action may have had effects
        logger.exception("approval %s failed to execute", request.id)
        outcome, content = Outcome.FAILED, f"Error: {request.agent_name} failed: {type(exc).__name__}: {exc}"
    await sync_to_async(services.approval_execution_record)(request_id=request.id, outcome=outcome, result=content)
    request.outcome, request.result = outcome, content
    return as_action(request)


async def _perform(request: ApprovalRequest, *, tools: ToolRegistry, credentials: Any,
                   config: ReactLoopConfig) -> tuple[str, str]:
    from pool import services as pool

    if request.status == ApprovalRequest.Status.CANCELLED:
        if request.pool_entry_id:
            await sync_to_async(pool.pool_entry_cancel)(entry_id=request.pool_entry_id, owner_id=request.owner_id)
        return Outcome.CANCELLED, services.CANCELLED_RESULT
    agent = await _restore(request, tools=tools, credentials=credentials, config=config)
    if agent is None:
        return Outcome.FAILED, (f"Error: {request.agent_name} could not be resumed (it expired or was removed); "
                                "the action was not performed.")
    try:
        refusal = _check_arguments(agent, request)
        if refusal:
            logger.warning("approval %s refused: %s", request.id, refusal)
            return Outcome.REFUSED, refusal
        result = await _run_approved(agent, config)
    finally:
        await sync_to_async(pool.pool_entry_remove)(entry_id=request.pool_entry_id, owner_id=request.owner_id)
    if result.status == AgentStatus.COMPLETED:
        return Outcome.COMPLETED, result.message
    if result.status == AgentStatus.CANCELLED:
        return Outcome.CANCELLED, result.message
    return Outcome.FAILED, f"Error: {result.message}"


async def _restore(request: ApprovalRequest, *, tools: ToolRegistry, credentials: Any,
                   config: ReactLoopConfig) -> StandardAgent | None:
    from pool import services as pool

    if request.pool_entry_id is None:
        return None
    entry = await sync_to_async(pool.pool_entry_resume)(entry_id=request.pool_entry_id, owner_id=request.owner_id)
    if entry is None:
        return None
    context = ToolExecutionContext(tenant_id=request.owner_id, conversation_id=str(request.conversation_id),
                                   run_id=str(request.run_id or ""), source="approval",
                                   tool_call_id=call_id_for(request), credentials=credentials,
                                   extra={"loop_config": config, "approval_id": str(request.id)})
    return await sync_to_async(pool.pool_entry_restore)(
        entry=entry, agent_cls=agent_class_for(tools, entry.agent_type), context=context)


def _check_arguments(agent: StandardAgent, request: ApprovalRequest) -> str:
    """Apply the user's edits to the resumed agent, then compare hashes; a refusal message or ''."""
    final = request.final_arguments or {}
    edits = {name: value for name, value in final.items() if request.details.get(name) != value}
    agent.absorb(edits)
    if agent.errors:
        return f"Refused: {request.agent_name} rejected the approved values ({agent.errors}); nothing was done."
    about_to_use = json.loads(json.dumps(agent.fields, default=str))
    if services.arguments_hash(about_to_use) != request.final_hash:
        return (f"Refused: the arguments {request.agent_name} was about to use differ from the ones the user "
                "approved; nothing was done. Ask the user again if the action is still wanted.")
    return ""


async def _run_approved(agent: StandardAgent, config: ReactLoopConfig) -> AgentResult:
    agent.state["_approved"] = True  # set by the framework only, after a recorded user decision
    try:
        result = await asyncio.wait_for(agent.advance(), config.agent_tool_execution_timeout)
    except TimeoutError:
        return AgentResult.error(f"{agent.agent_name()} timed out after {config.agent_tool_execution_timeout:g} s.")
    except Exception as exc:
        logger.warning("approved agent %s failed", agent.agent_name(), exc_info=True)
        return AgentResult.error(f"{agent.agent_name()} failed: {type(exc).__name__}: {exc}")
    if result.status.waiting:
        return AgentResult.error(f"{agent.agent_name()} asked for more instead of acting: {result.message}")
    return result
