"""REST routes of the approvals app, mounted under /api/v1/."""

from django.urls import path

from approvals.api import ApprovalDecisionApi, ApprovalDetailApi, ApprovalListApi

urlpatterns = [
    path("approvals", ApprovalListApi.as_view(), name="approval-list"),
    path("approvals/<str:request_id>", ApprovalDetailApi.as_view(), name="approval-detail"),
    path("approvals/<str:request_id>/decision", ApprovalDecisionApi.as_view(), name="approval-decision"),
]
