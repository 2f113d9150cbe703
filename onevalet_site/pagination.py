"""The API's pagination: DRF's limit/offset, with both numbers kept in a sane range.

Unbounded, a client could ask for ``limit=10**30`` and get a 500 from the database driver
(SQLite and PostgreSQL integers are 64-bit); the fuzzer in the test suite found exactly that.
"""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 2**62  # past any real row count, inside every database's integer range


class OneValetPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 200

    def get_offset(self, request) -> int:  # noqa: ANN001 - DRF's signature
        return min(super().get_offset(request), MAX_OFFSET)
