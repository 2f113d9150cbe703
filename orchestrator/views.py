"""The chat page: conversations, the selected one's messages, and the live socket.

Rendering is server-side for what is stored; ``static/onevalet/chat.js`` adds what happens
live (streamed tokens, tool activity, approvals, notifications) from ``/ws/chat/``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from notifications.selectors import notification_list, notification_unread_count
from onevalet_site.errors import NotFound
from orchestrator import selectors

CONVERSATIONS_SHOWN = 50
MESSAGES_SHOWN = 200
NOTIFICATIONS_SHOWN = 5


@login_required
def chat_page(request: HttpRequest) -> HttpResponse:
    owner_id = request.user.pk
    selected = request.GET.get("c")
    try:
        conversation = selectors.conversation_get(owner_id=owner_id, conversation_id=selected) if selected else None
    except NotFound as exc:
        raise Http404(exc.message) from None
    messages: list[Any] = []
    if conversation is not None:
        rows = selectors.message_list(owner_id=owner_id, conversation_id=conversation.id)
        messages = list(rows.exclude(role="tool").order_by("-id")[:MESSAGES_SHOWN])[::-1]
    context = {
        "conversations": selectors.conversation_list(owner_id=owner_id)[:CONVERSATIONS_SHOWN],
        "conversation": conversation,
        "messages": messages,
        "notifications": notification_list(owner_id=owner_id)[:NOTIFICATIONS_SHOWN],
        "unread_count": notification_unread_count(owner_id=owner_id),
        "chat_config": {"conversation": str(conversation.id) if conversation else None, "socket": "/ws/chat/"},
    }
    return render(request, "orchestrator/chat.html", context)
