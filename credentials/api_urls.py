"""REST routes of the credentials app, mounted under /api/v1/."""

urlpatterns: list = []
