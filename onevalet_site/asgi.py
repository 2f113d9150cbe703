"""ASGI entry point: HTTP goes to Django, websockets to the Channels routes.

Websockets pass through ``AllowedHostsOriginValidator`` (cross-origin sockets are refused)
and the session + token authentication middleware.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "onevalet_site.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from onevalet_site.embedded_redis import ensure_for_settings  # noqa: E402
from onevalet_site.routing import websocket_urlpatterns  # noqa: E402
from onevalet_site.ws_auth import TokenOrSessionAuthMiddlewareStack  # noqa: E402

ensure_for_settings()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            TokenOrSessionAuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
