"""REST routes of the orchestrator app, mounted under /api/v1/."""

urlpatterns: list = []
