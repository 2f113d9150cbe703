"""Page routes of the approvals app."""

urlpatterns: list = []
