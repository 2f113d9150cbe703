"""Admin of the pool app."""

from django.contrib import admin  # noqa: F401
