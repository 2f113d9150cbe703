"""Input rules for credentials, shared by the store, the REST API and the admin.

Every message here describes what is wrong with the input and never repeats the input:
a rejected value may well be a secret pasted into the wrong place.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from onevalet_site.errors import InvalidInput, OneValetError, TooLarge

# Service and account names appear in URLs, log lines and admin lists: short lowercase slugs
# keep them readable there and stop "Google" and "google" from becoming two services.
NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
NAME_MAX_LENGTH = 64
NAME_RULE = "1-64 characters: lowercase letters, digits, '-' or '_', starting with a letter or digit"
KEY_NAME_MAX_LENGTH = 100
DEFAULT_MAX_BYTES = 16 * 1024  # OAuth token sets with an id_token JWT stay well below this.

_NAME_RE = re.compile(NAME_PATTERN)

name_validator = RegexValidator(_NAME_RE, f"Use {NAME_RULE}.", code="invalid_name")


def max_value_bytes() -> int:
    """Largest accepted value (its compact JSON), ``CREDENTIALS_MAX_BYTES`` when set."""
    return int(getattr(settings, "CREDENTIALS_MAX_BYTES", DEFAULT_MAX_BYTES))


def check_name(value: Any, *, field: str) -> str:
    """Return ``value`` when it is a valid service or account name, else raise ``InvalidInput``."""
    if not isinstance(value, str) or not _NAME_RE.fullmatch(value):
        raise InvalidInput(f"{field} must be {NAME_RULE}.", details={"field": field})
    return value


def check_value(value: Any) -> str:
    """Validate a credential value and return its compact JSON (what gets encrypted).

    A value is a non-empty JSON object whose keys are short non-empty strings; the format
    inside is the business of the tool that uses it (there is no credential "scheme").
    """
    if not isinstance(value, dict):
        raise InvalidInput("credentials must be a JSON object.", details={"field": "credentials"})
    if not value:
        raise InvalidInput("credentials must not be empty.", details={"field": "credentials"})
    for key in value:
        if not isinstance(key, str) or not key or len(key) > KEY_NAME_MAX_LENGTH:
            raise InvalidInput(
                f"Each key of credentials must be a non-empty string of at most {KEY_NAME_MAX_LENGTH} characters.",
                details={"field": "credentials"},
            )
    try:
        serialized = json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        serialized = None
    if serialized is None:  # raised outside the except block: no chained error holding the value
        raise InvalidInput("credentials must contain JSON values only.", details={"field": "credentials"})
    limit = max_value_bytes()
    if len(serialized.encode()) > limit:
        raise TooLarge(f"credentials must be at most {limit} bytes as JSON.", details={"field": "credentials"})
    return serialized


def as_validation_error(error: OneValetError) -> ValidationError:
    """The same rule violation, in the form Django forms display."""
    return ValidationError(error.message, code=error.code)
