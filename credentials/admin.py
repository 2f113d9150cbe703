"""Admin of the credentials app."""

from django.contrib import admin  # noqa: F401
