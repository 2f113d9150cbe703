"""REST for triggers: CRUD, run history, pause/resume/run-now, and publishing events.

Thin views: validate, call a service or selector scoped to ``request.user``, serialize.
Another user's trigger is a 404, exactly like a missing one.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from triggers import selectors, services
from triggers.event_bus import EventBus
from triggers.firing import trigger_task_run_now
from triggers.serializers import (
    EventInput,
    EventOutput,
    TriggerRunOutput,
    TriggerTaskInput,
    TriggerTaskOutput,
    TriggerTaskPatch,
)


class TriggerListCreateApi(generics.GenericAPIView):
    serializer_class = TriggerTaskOutput
    parser_classes = [JSONParser]

    def get_queryset(self) -> Any:
        return selectors.trigger_task_list(owner_id=self.request.user.pk, status=self.request.query_params.get("status"))

    @extend_schema(operation_id="triggers_list", summary="List your triggers", responses=TriggerTaskOutput(many=True))
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(TriggerTaskOutput(page, many=True).data)

    @extend_schema(operation_id="triggers_create", summary="Create a trigger", request=TriggerTaskInput,
                   responses={201: TriggerTaskOutput})
    def post(self, request: Request) -> Response:
        data = TriggerTaskInput(data=request.data)
        data.is_valid(raise_exception=True)
        task = services.trigger_task_create(owner_id=request.user.pk, **data.validated_data)
        return Response(TriggerTaskOutput(task).data, status=status.HTTP_201_CREATED)


class TriggerDetailApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(operation_id="triggers_get", summary="One trigger", responses=TriggerTaskOutput)
    def get(self, request: Request, task_id: int) -> Response:
        return Response(TriggerTaskOutput(selectors.trigger_task_get(owner_id=request.user.pk, task_id=task_id)).data)

    @extend_schema(operation_id="triggers_update", summary="Change a trigger (its schedule follows)",
                   request=TriggerTaskPatch, responses=TriggerTaskOutput)
    def patch(self, request: Request, task_id: int) -> Response:
        data = TriggerTaskPatch(data=request.data)
        data.is_valid(raise_exception=True)
        task = services.trigger_task_update(owner_id=request.user.pk, task_id=task_id, **data.validated_data)
        return Response(TriggerTaskOutput(task).data)

    @extend_schema(operation_id="triggers_delete", summary="Delete a trigger and its schedule", responses={204: None})
    def delete(self, request: Request, task_id: int) -> Response:
        services.trigger_task_delete(owner_id=request.user.pk, task_id=task_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TriggerRunsApi(generics.GenericAPIView):
    serializer_class = TriggerRunOutput

    def get_queryset(self) -> Any:
        return selectors.trigger_run_list(owner_id=self.request.user.pk, task_id=self.kwargs["task_id"])

    @extend_schema(operation_id="triggers_runs", summary="Run history of a trigger", responses=TriggerRunOutput(many=True))
    def get(self, request: Request, task_id: int) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(TriggerRunOutput(page, many=True).data)


class _TriggerActionApi(APIView):
    action_name = ""

    @extend_schema(request=None, responses=TriggerTaskOutput)
    def post(self, request: Request, task_id: int) -> Response:
        if self.action_name == "run":
            with transaction.atomic():
                trigger_task_run_now(owner_id=request.user.pk, task_id=task_id)
            task = selectors.trigger_task_get(owner_id=request.user.pk, task_id=task_id)
            return Response(TriggerTaskOutput(task).data, status=status.HTTP_202_ACCEPTED)
        service = services.trigger_task_pause if self.action_name == "pause" else services.trigger_task_resume
        return Response(TriggerTaskOutput(service(owner_id=request.user.pk, task_id=task_id)).data)


class TriggerPauseApi(_TriggerActionApi):
    action_name = "pause"


class TriggerResumeApi(_TriggerActionApi):
    action_name = "resume"


class TriggerRunNowApi(_TriggerActionApi):
    action_name = "run"


class EventPublishApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(operation_id="events_publish", summary="Publish an event to your event triggers",
                   request=EventInput, responses={202: EventOutput})
    def post(self, request: Request) -> Response:
        data = EventInput(data=request.data)
        data.is_valid(raise_exception=True)
        event_id = EventBus().publish(data.validated_data["source"], data.validated_data["type"],
                                      data.validated_data["data"], owner_id=request.user.pk)
        return Response({"id": event_id}, status=status.HTTP_202_ACCEPTED)
