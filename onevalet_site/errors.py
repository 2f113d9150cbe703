"""One exception family for domain errors, mapped to HTTP and websocket errors here only.

Services raise these; REST views, pages and consumers never build error responses by hand.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class OneValetError(Exception):
    """Base of every domain error. ``code`` is stable for clients; ``message`` is for people."""

    status: int = 400
    code: str = "invalid"

    def __init__(self, message: str, *, code: str | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return body


class InvalidInput(OneValetError):
    status = 400
    code = "invalid"


class NotFound(OneValetError):
    """Also what another user's object looks like: owners never learn it exists."""

    status = 404
    code = "not_found"


class Conflict(OneValetError):
    """A state change lost a race or came too late (already decided, expired)."""

    status = 409
    code = "conflict"


class TooLarge(OneValetError):
    status = 413
    code = "too_large"


class RateLimited(OneValetError):
    status = 429
    code = "rate_limited"


class LimitReached(OneValetError):
    status = 409
    code = "limit_reached"


class ServiceUnavailable(OneValetError):
    """A dependency (the LLM, Redis) is misconfigured or down."""

    status = 503
    code = "unavailable"


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, plus the domain family; every error body is ``{code, message, ...}``."""
    if isinstance(exc, OneValetError):
        return Response(exc.as_dict(), status=exc.status)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, drf_exceptions.ValidationError):
        response.data = {"code": "invalid", "message": "The request is not valid.", "details": response.data}
    elif isinstance(exc, drf_exceptions.APIException):
        detail = response.data.get("detail", str(exc)) if isinstance(response.data, dict) else str(exc)
        response.data = {"code": exc.get_codes() if isinstance(exc.get_codes(), str) else "error", "message": str(detail)}
    return response


def ws_error_event(exc: Exception) -> dict[str, Any]:
    """The websocket ``error`` event for an exception; unexpected ones say nothing internal."""
    if isinstance(exc, OneValetError):
        return {"type": "error", **exc.as_dict()}
    return {"type": "error", "code": "internal", "message": "Something went wrong on our side; nothing was lost."}
