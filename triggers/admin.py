"""Admin of the triggers app."""

from django.contrib import admin  # noqa: F401
