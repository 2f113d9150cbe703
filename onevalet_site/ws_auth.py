"""Websocket authentication: the browser's session cookie, or a DRF token for mobile clients.

Mobile clients send the token in the ``Sec-WebSocket-Protocol`` header
(``["onevalet", "token.<key>"]``) rather than the URL, so it never reaches access logs.
"""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator

TOKEN_PREFIX = "token."


@database_sync_to_async
def _user_for_token(key: str):
    from rest_framework.authtoken.models import Token

    try:
        return Token.objects.select_related("user").get(key=key).user
    except Token.DoesNotExist:
        return None


class TokenAuthMiddleware(BaseMiddleware):
    """Sets ``scope["user"]`` from a token subprotocol when the session gave no user."""

    async def __call__(self, scope, receive, send):
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            for protocol in scope.get("subprotocols", []):
                if protocol.startswith(TOKEN_PREFIX):
                    token_user = await _user_for_token(protocol[len(TOKEN_PREFIX):])
                    if token_user is not None and token_user.is_active:
                        scope["user"] = token_user
                    break
        return await super().__call__(scope, receive, send)


def TokenOrSessionAuthMiddlewareStack(inner):  # noqa: N802 - mirrors Channels' naming
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))


class BrowserOriginValidator(OriginValidator):
    """Refuse cross-origin sockets from browsers; let native clients without ``Origin`` in.

    Cross-site websocket hijacking needs a victim's browser, and browsers always send
    ``Origin``; native mobile clients usually send none and authenticate with a token, so a
    missing header is not a reason to refuse them.
    """

    def valid_origin(self, parsed_origin) -> bool:  # noqa: ANN001 - Channels' signature
        if parsed_origin is None:
            return True
        return self.validate_origin(parsed_origin)


def allowed_hosts_origin_validator(application):  # noqa: ANN001, ANN201
    from django.conf import settings

    return BrowserOriginValidator(application, settings.ALLOWED_HOSTS)
