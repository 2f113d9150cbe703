"""Websocket routes. Each app contributes its consumers here."""

from __future__ import annotations

websocket_urlpatterns: list = []
