"""REST routes of the triggers app, mounted under /api/v1/."""

from django.urls import path

from triggers import api

urlpatterns = [
    path("triggers", api.TriggerListCreateApi.as_view(), name="trigger-list"),
    path("triggers/<int:task_id>", api.TriggerDetailApi.as_view(), name="trigger-detail"),
    path("triggers/<int:task_id>/runs", api.TriggerRunsApi.as_view(), name="trigger-runs"),
    path("triggers/<int:task_id>/pause", api.TriggerPauseApi.as_view(), name="trigger-pause"),
    path("triggers/<int:task_id>/resume", api.TriggerResumeApi.as_view(), name="trigger-resume"),
    path("triggers/<int:task_id>/run", api.TriggerRunNowApi.as_view(), name="trigger-run-now"),
    path("events", api.EventPublishApi.as_view(), name="event-publish"),
]
