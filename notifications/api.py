"""REST for notifications: the list (unread first), mark one read, mark all read.

Thin: each view calls a selector or service with ``request.user`` as the owner.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from notifications import selectors, services
from notifications.models import Notification

ErrorOutput = inline_serializer(
    name="NotificationError",
    fields={"code": serializers.CharField(), "message": serializers.CharField()},
)


class NotificationOutput(serializers.ModelSerializer):
    is_read = serializers.BooleanField(read_only=True)

    class Meta:
        model = Notification
        fields = ["id", "title", "body", "link", "source", "data", "is_read", "read_at", "created_at"]
        read_only_fields = fields


class NotificationListApi(generics.GenericAPIView):
    serializer_class = NotificationOutput

    def get_queryset(self) -> Any:
        return selectors.notification_list(owner_id=self.request.user.pk, unread_first=True)

    @extend_schema(operation_id="notifications_list", summary="The user's notifications, unread first, newest first",
                   responses=NotificationOutput(many=True))
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(NotificationOutput(page, many=True).data)


class NotificationReadApi(APIView):
    @extend_schema(operation_id="notifications_mark_read", summary="Mark one notification read (idempotent)",
                   request=None, responses={200: NotificationOutput, 404: OpenApiResponse(ErrorOutput)})
    def post(self, request: Request, notification_id: int) -> Response:
        notification = services.notification_mark_read(owner_id=request.user.pk, notification_id=notification_id)
        return Response(NotificationOutput(notification).data)


class NotificationReadAllApi(APIView):
    @extend_schema(operation_id="notifications_mark_all_read", summary="Mark every unread notification read",
                   request=None,
                   responses=inline_serializer(name="NotificationsMarked", fields={"marked": serializers.IntegerField()}))
    def post(self, request: Request) -> Response:
        return Response({"marked": services.notification_mark_all_read(owner_id=request.user.pk)})
