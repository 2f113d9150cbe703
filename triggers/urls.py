"""Page routes of the triggers app."""

urlpatterns: list = []
