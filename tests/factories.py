"""Plain factory functions for test data.

Plain functions rather than factory_boy: the models are few, and an explicit call shows in
the test exactly what it creates. Sync only: from async tests wrap them in
``asgiref.sync.sync_to_async`` (or use a sync fixture such as ``user``).
"""

from __future__ import annotations

import itertools
import uuid
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model

if TYPE_CHECKING:  # importing auth models at module level would need Django set up first
    from django.contrib.auth.models import AbstractBaseUser

_counter = itertools.count(1)
# Per-process suffix: unique even against rows left by another process in a reused database.
_SUFFIX = uuid.uuid4().hex[:6]

PROFILE_FIELDS = ("display_name", "timezone")


def make_user(username: str | None = None, password: str = "pw", **extra: Any) -> "AbstractBaseUser":
    """Create a user (unique username unless given) together with its ``UserProfile``.

    ``display_name`` and ``timezone`` in ``extra`` go to the profile; everything else to the user.
    """
    from orchestrator.models import UserProfile

    profile = {key: extra.pop(key) for key in PROFILE_FIELDS if key in extra}
    username = username or f"user{next(_counter)}_{_SUFFIX}"
    user = get_user_model().objects.create_user(username=username, password=password, **extra)
    # update_or_create: robust if a post_save signal already created the profile.
    UserProfile.objects.update_or_create(user=user, defaults={"display_name": "", "timezone": "UTC", **profile})
    return user
