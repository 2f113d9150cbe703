"""REST routes of the approvals app, mounted under /api/v1/."""

urlpatterns: list = []
