"""REST for clients: send a message (and get the run's result), list conversations and
their messages. Thin: validate, call the orchestrator or a selector, serialize.

``POST /messages`` runs the whole loop inside the request. The run's events are also
published to the user's event stream, so an open chat page shows a message sent from
the phone as it happens.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView

from orchestrator import event_store, orchestrator, selectors, services
from orchestrator.serializers import (
    ConversationOutput,
    ErrorOutput,
    MessageInput,
    MessageOutcomeOutput,
    MessageOutput,
)


class MessageRateThrottle(UserRateThrottle):
    """Each message costs LLM tokens: a tighter per-user rate than the API's default
    (``ONEVALET_MESSAGE_RATE``, e.g. ``60/minute``)."""

    scope = "messages"


async def _handle(*, user_id: int, content: Any, conversation: Any) -> dict[str, Any]:
    orch = orchestrator.get_orchestrator()
    text = orch.should_process(content)  # before creating a conversation for a refused message
    conversation_id = str(conversation) if conversation else None
    if conversation_id is None:
        conversation_id = str((await _create_conversation(user_id, text)).id)
    outcome = await orch.handle_message(user_id=user_id, content=text, conversation_id=conversation_id,
                                        source="api", emit=event_store.sink_for(user_id, conversation_id))
    return outcome.as_dict()


async def _create_conversation(user_id: int, text: str) -> Any:
    return await sync_to_async(services.conversation_create)(owner_id=user_id, title=text.splitlines()[0])


class MessageApi(APIView):
    parser_classes = [JSONParser]
    throttle_classes = [UserRateThrottle, MessageRateThrottle]

    @extend_schema(
        operation_id="messages_send",
        summary="Send a message to the assistant and wait for its answer",
        request=MessageInput,
        responses={
            200: MessageOutcomeOutput,
            400: OpenApiResponse(ErrorOutput, description="Empty or malformed message."),
            404: OpenApiResponse(ErrorOutput, description="No such conversation (or another user's)."),
            413: OpenApiResponse(ErrorOutput, description="The message is longer than the loop accepts."),
            429: OpenApiResponse(ErrorOutput, description="Too many messages; see Retry-After."),
            503: OpenApiResponse(ErrorOutput, description="The LLM is not configured or unreachable."),
        },
    )
    def post(self, request: Request) -> Response:
        data = MessageInput(data=request.data)
        data.is_valid(raise_exception=True)
        result = async_to_sync(_handle)(user_id=request.user.pk, content=data.validated_data["content"],
                                        conversation=data.validated_data.get("conversation"))
        return Response(result)


class ConversationListApi(generics.GenericAPIView):
    serializer_class = ConversationOutput

    def get_queryset(self) -> Any:
        return selectors.conversation_list(owner_id=self.request.user.pk)

    @extend_schema(operation_id="conversations_list", summary="The user's conversations, most recent first",
                   responses=ConversationOutput(many=True))
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(ConversationOutput(page, many=True).data)


class ConversationMessagesApi(generics.GenericAPIView):
    serializer_class = MessageOutput

    def get_queryset(self) -> Any:
        return selectors.message_list(owner_id=self.request.user.pk, conversation_id=self.kwargs["conversation_id"])

    @extend_schema(operation_id="conversations_messages", summary="The messages of one conversation, oldest first",
                   responses={200: MessageOutput(many=True), 404: OpenApiResponse(ErrorOutput)})
    def get(self, request: Request, conversation_id: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(MessageOutput(page, many=True).data)
