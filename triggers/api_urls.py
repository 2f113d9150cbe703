"""REST routes of the triggers app, mounted under /api/v1/."""

urlpatterns: list = []
