"""REST routes of the notifications app, mounted under /api/v1/."""

urlpatterns: list = []
