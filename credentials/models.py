"""Models of the credentials app."""
