"""Page routes of the orchestrator app."""

urlpatterns: list = []
