"""Page routes of the credentials app."""

urlpatterns: list = []
