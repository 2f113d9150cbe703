"""Models of the approvals app."""
