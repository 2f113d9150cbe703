"""REST routes of the notifications app, mounted under /api/v1/."""

from django.urls import path

from notifications.api import NotificationListApi, NotificationReadAllApi, NotificationReadApi

urlpatterns = [
    path("notifications", NotificationListApi.as_view(), name="notification-list"),
    path("notifications/read-all", NotificationReadAllApi.as_view(), name="notification-read-all"),
    path("notifications/<int:notification_id>/read", NotificationReadApi.as_view(), name="notification-read"),
]
