"""REST door of the approvals: list, detail, decide. Thin: validate, call the service, serialize.

The decision goes through ``approval_decide`` like the web page and the chat; its domain
errors (404 another tenant's or unknown, 409 already decided or expired, 400 a bad edit)
are mapped to HTTP by the one exception handler.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import selectors, services
from approvals.models import ApprovalRequest
from approvals.serializers import ApprovalOutput, DecisionInput, StatusFilterInput


class ApprovalListApi(generics.GenericAPIView):
    serializer_class = ApprovalOutput

    @extend_schema(operation_id="approvals_list", summary="The user's approval requests, pending first",
                   parameters=[StatusFilterInput], responses=ApprovalOutput(many=True))
    def get(self, request: Request) -> Response:
        query = StatusFilterInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = selectors.approval_list(owner_id=request.user.pk, status=query.validated_data.get("status"))
        page = self.paginate_queryset(rows)
        if page is not None:
            return self.get_paginated_response(ApprovalOutput(page, many=True).data)
        return Response(ApprovalOutput(rows, many=True).data)


class ApprovalDetailApi(APIView):
    @extend_schema(operation_id="approvals_get", summary="One approval request", responses=ApprovalOutput)
    def get(self, request: Request, request_id: Any) -> Response:
        row = selectors.approval_get(owner_id=request.user.pk, request_id=request_id)
        return Response(ApprovalOutput(row).data)


class ApprovalDecisionApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(operation_id="approvals_decide", summary="Approve, edit (allowed fields) or cancel a request",
                   request=DecisionInput,
                   responses={200: ApprovalOutput, 400: OpenApiResponse(description="invalid decision or edit"),
                              404: OpenApiResponse(description="no such request"),
                              409: OpenApiResponse(description="already decided or expired")})
    def post(self, request: Request, request_id: Any) -> Response:
        body = DecisionInput(data=request.data)
        body.is_valid(raise_exception=True)
        row = services.approval_decide(owner_id=request.user.pk, request_id=request_id,
                                       decision=body.validated_data["decision"],
                                       changes=body.validated_data.get("changes"),
                                       channel=ApprovalRequest.Channel.REST, actor_id=request.user.pk)
        return Response(ApprovalOutput(row).data)
