"""Page routes of the orchestrator app."""

from django.urls import path

from orchestrator.views import chat_page

urlpatterns = [
    path("chat/", chat_page, name="chat"),
]
