"""Admin of the approvals app."""

from django.contrib import admin  # noqa: F401
