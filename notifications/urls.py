"""Page routes of the notifications app."""

urlpatterns: list = []
