"""Models of the pool app."""
