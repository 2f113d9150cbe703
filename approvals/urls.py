"""Page routes of the approvals app."""

from django.urls import path

from approvals.views import approval_detail_page, approval_list_page

urlpatterns = [
    path("approvals/", approval_list_page, name="approvals"),
    path("approvals/<str:request_id>/", approval_detail_page, name="approval-page"),
]
