"""REST routes of the orchestrator app, mounted under /api/v1/."""

from django.urls import path

from orchestrator.api import ConversationListApi, ConversationMessagesApi, MessageApi

urlpatterns = [
    path("messages", MessageApi.as_view(), name="message-send"),
    path("conversations", ConversationListApi.as_view(), name="conversation-list"),
    path("conversations/<uuid:conversation_id>/messages", ConversationMessagesApi.as_view(),
         name="conversation-messages"),
]
