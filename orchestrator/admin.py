"""Admin of the orchestrator app."""

from django.contrib import admin  # noqa: F401
