"""REST for the mobile app: list, save (create or replace) and delete the user's credentials.

Values are write-only: a response never carries one, only the metadata of the credential.
Every operation is scoped to ``request.user``; another user's credential is a plain 404.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from credentials import selectors, services
from credentials.models import DEFAULT_ACCOUNT, Credential
from credentials.validators import NAME_MAX_LENGTH, NAME_PATTERN, NAME_RULE, max_value_bytes
from onevalet_site.errors import NotFound

ErrorOutput = inline_serializer(
    name="CredentialError",
    fields={
        "code": serializers.CharField(),
        "message": serializers.CharField(),
        "details": serializers.DictField(required=False),
    },
)


class CredentialInput(serializers.Serializer):
    service = serializers.RegexField(NAME_PATTERN, max_length=NAME_MAX_LENGTH, help_text=f"Service name: {NAME_RULE}.")
    account_name = serializers.RegexField(
        NAME_PATTERN, max_length=NAME_MAX_LENGTH, default=DEFAULT_ACCOUNT, help_text=f"Account name: {NAME_RULE}."
    )
    credentials = serializers.DictField(
        child=serializers.JSONField(),
        allow_empty=False,
        write_only=True,
        help_text=f"The secret value, any non-empty JSON object up to {max_value_bytes()} bytes. Never returned.",
    )


class CredentialOutput(serializers.Serializer):
    service = serializers.CharField()
    account_name = serializers.CharField()
    keys = serializers.ListField(child=serializers.CharField(), help_text="Names of the value's keys, never values.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: Credential) -> dict[str, Any]:
        return super().to_representation(selectors.credential_metadata(instance))


class CredentialListCreateApi(generics.GenericAPIView):
    serializer_class = CredentialOutput
    parser_classes = [JSONParser]  # a value is a JSON object; form encodings cannot carry one

    def get_queryset(self) -> Any:
        return selectors.credential_list(owner_id=self.request.user.pk)

    @extend_schema(
        operation_id="credentials_list",
        summary="List the connected accounts (metadata only)",
        responses=CredentialOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(CredentialOutput(page, many=True).data)

    @extend_schema(
        operation_id="credentials_save",
        summary="Store credentials for a service account, replacing any stored before",
        request=CredentialInput,
        responses={
            200: OpenApiResponse(CredentialOutput, description="Replaced the stored value."),
            201: OpenApiResponse(CredentialOutput, description="Created."),
            400: ErrorOutput,
            413: ErrorOutput,
        },
    )
    def post(self, request: Request) -> Response:
        data = CredentialInput(data=request.data)
        data.is_valid(raise_exception=True)
        credential, created = services.credential_save(owner_id=request.user.pk, **data.validated_data)
        return Response(
            CredentialOutput(credential).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class CredentialDetailApi(APIView):
    @extend_schema(
        operation_id="credentials_delete",
        summary="Delete stored credentials",
        responses={204: None, 404: ErrorOutput},
    )
    def delete(self, request: Request, service: str, account_name: str) -> Response:
        if not services.credential_delete(owner_id=request.user.pk, service=service, account_name=account_name):
            raise NotFound(f"No credentials stored for {service}/{account_name}.")
        return Response(status=status.HTTP_204_NO_CONTENT)
