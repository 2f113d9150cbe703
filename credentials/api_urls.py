"""REST routes of the credentials app, mounted under /api/v1/."""

from django.urls import path

from credentials.api import CredentialDetailApi, CredentialListCreateApi

urlpatterns = [
    path("credentials", CredentialListCreateApi.as_view(), name="credential-list"),
    path("credentials/<str:service>/<str:account_name>", CredentialDetailApi.as_view(), name="credential-detail"),
]
