"""Websocket routes. Each app contributes its consumers here."""

from __future__ import annotations

from django.urls import path

from orchestrator.consumers import ChatConsumer

websocket_urlpatterns: list = [
    path("ws/chat/", ChatConsumer.as_asgi()),
]
