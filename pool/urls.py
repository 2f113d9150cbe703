"""Page routes of the pool app."""

urlpatterns: list = []
