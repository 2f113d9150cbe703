"""Models of the triggers app."""
