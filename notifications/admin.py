"""Admin of the notifications app."""

from django.contrib import admin  # noqa: F401
