"""ASGI entry point: HTTP goes to Django, websockets to the Channels routes.

Websockets pass an origin check (cross-origin browser sockets are refused; native clients
without an ``Origin`` header are let in to authenticate with a token)
and the session + token authentication middleware.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "onevalet_site.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from onevalet_site.embedded_redis import ensure_for_settings  # noqa: E402
from onevalet_site.routing import websocket_urlpatterns  # noqa: E402
from onevalet_site.ws_auth import TokenOrSessionAuthMiddlewareStack, allowed_hosts_origin_validator  # noqa: E402

ensure_for_settings()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": allowed_hosts_origin_validator(
            TokenOrSessionAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
