"""REST routes of the pool app, mounted under /api/v1/."""

urlpatterns: list = []
