"""One strategy table for every LLM error; the loop only dispatches.

``classify`` maps an exception to an ``ErrorKind``; ``STRATEGIES`` maps each kind to a
handler that looks at the attempt so far and returns a ``Decision``: wait and retry,
recover the context and retry, stop with an answer for the user, or raise to the caller.
Adding an error class is one classifier line and, if needed, one handler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

import openai

from orchestrator.config import ReactLoopConfig
from orchestrator.llm import LLMBadResponse, LLMNotConfigured

logger = logging.getLogger("onevalet.llm")

CONVERSATION_TOO_LONG = (
    "This conversation has grown too long for me to keep track of. "
    "Please start a new conversation and I'll pick up from there."
)
LLM_UNAVAILABLE = "I couldn't reach my language model just now ({reason}). Please try again in a moment."


class LLMConfigurationError(Exception):
    """The LLM refused our credentials or configuration (401/403, no key): the operator must act."""


class ErrorKind(Enum):
    RATE_LIMIT = "rate_limit"
    TRANSIENT = "transient"
    AUTH = "auth"
    CONTEXT_OVERFLOW = "context_overflow"
    OTHER = "other"


@dataclass(slots=True)
class Attempt:
    """What has been tried for one LLM call so far."""

    rate_limit_retries: int = 0
    transient_retries: int = 0
    overflow_steps: int = 0
    steps_taken: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Retry:
    delay: float
    reason: str


@dataclass(frozen=True, slots=True)
class RecoverContext:
    step: int  # index into ContextManager.OVERFLOW_STEPS


@dataclass(frozen=True, slots=True)
class GiveUp:
    """End the run with ``response`` as the answer; ``error`` goes to the transcript."""

    response: str
    error: str


@dataclass(frozen=True, slots=True)
class Escalate:
    error: Exception


Decision = Retry | RecoverContext | GiveUp | Escalate


def classify(exc: BaseException) -> ErrorKind:
    if isinstance(exc, openai.RateLimitError):
        return ErrorKind.RATE_LIMIT
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return ErrorKind.TRANSIENT
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError, LLMNotConfigured)):
        return ErrorKind.AUTH
    if _is_context_overflow(exc):
        return ErrorKind.CONTEXT_OVERFLOW
    return ErrorKind.OTHER


def _is_context_overflow(exc: BaseException) -> bool:
    if not isinstance(exc, openai.BadRequestError):
        return False
    if getattr(exc, "code", None) == "context_length_exceeded":
        return True
    text = str(exc).lower()
    return "context_length_exceeded" in text or "maximum context length" in text


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw:
            try:
                return max(0.0, float(raw) * scale)
            except ValueError:
                continue
    return None


def _rate_limit(exc: BaseException, attempt: Attempt, config: ReactLoopConfig) -> Decision:
    if attempt.rate_limit_retries >= config.llm_max_retries:
        return GiveUp(LLM_UNAVAILABLE.format(reason="it is rate-limiting requests"), f"rate limited: {exc}")
    hinted = _retry_after(exc)  # the server said when: trust it over our own backoff
    delay = hinted if hinted is not None else config.llm_retry_base_delay * (2 ** attempt.rate_limit_retries)
    delay = min(delay, config.llm_retry_max_delay)
    attempt.rate_limit_retries += 1
    return Retry(delay=delay, reason="rate_limit")


def _transient(exc: BaseException, attempt: Attempt, config: ReactLoopConfig) -> Decision:
    if attempt.transient_retries >= config.llm_transient_retries:
        return GiveUp(LLM_UNAVAILABLE.format(reason="it did not answer in time"), f"{type(exc).__name__}: {exc}")
    attempt.transient_retries += 1
    return Retry(delay=0.0, reason="transient")


def _auth(exc: BaseException, attempt: Attempt, config: ReactLoopConfig) -> Decision:
    return Escalate(LLMConfigurationError(
        f"the LLM endpoint refused OneValet's credentials ({type(exc).__name__}); "
        "check OPENAI_API_KEY, OPENAI_BASE_URL and ONEVALET_MODEL"))


def _overflow(exc: BaseException, attempt: Attempt, config: ReactLoopConfig) -> Decision:
    from orchestrator.context import ContextManager

    if attempt.overflow_steps >= len(ContextManager.OVERFLOW_STEPS):
        return GiveUp(CONVERSATION_TOO_LONG, "context overflow after every recovery step")
    step = attempt.overflow_steps
    attempt.overflow_steps += 1
    attempt.steps_taken.append(ContextManager.OVERFLOW_STEPS[step])
    return RecoverContext(step=step)


def _other(exc: BaseException, attempt: Attempt, config: ReactLoopConfig) -> Decision:
    status = getattr(exc, "status_code", None)
    reason = f"it answered with an error{f' ({status})' if status else ''}"
    if isinstance(exc, LLMBadResponse):
        reason = "its answer was malformed"
    logger.warning("LLM call failed: %s: %s", type(exc).__name__, exc)
    return GiveUp(LLM_UNAVAILABLE.format(reason=reason), f"{type(exc).__name__}: {exc}")


Handler = Callable[[BaseException, Attempt, ReactLoopConfig], Decision]

STRATEGIES: dict[ErrorKind, Handler] = {
    ErrorKind.RATE_LIMIT: _rate_limit,
    ErrorKind.TRANSIENT: _transient,
    ErrorKind.AUTH: _auth,
    ErrorKind.CONTEXT_OVERFLOW: _overflow,
    ErrorKind.OTHER: _other,
}


def decide(exc: BaseException, attempt: Attempt, config: ReactLoopConfig) -> Decision:
    return STRATEGIES[classify(exc)](exc, attempt, config)
