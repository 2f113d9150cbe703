"""The declarative event filter: operators, paths, combinators, validation; never code."""

from __future__ import annotations

import pytest

from onevalet_site.errors import InvalidInput
from triggers.filters import matches, validate_filter

EVENT = {"from": "orders@amazon.com", "subject": "Your order has shipped", "price": 42.5,
         "tags": ["shop", "parcel"], "meta": {"carrier": "DHL", "items": [{"sku": "A1"}]}}


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, True),
    ({"from": "orders@amazon.com"}, True),
    ({"from": "someone@else"}, False),
    ({"subject": {"contains": "SHIPPED"}}, True),
    ({"tags": {"contains": "parcel"}}, True),
    ({"price": {"gt": 40, "lte": 42.5}}, True),
    ({"price": {"lt": 40}}, False),
    ({"price": {"gt": "forty"}}, False),
    ({"meta.carrier": {"in": ["DHL", "UPS"]}}, True),
    ({"meta.items.0.sku": "A1"}, True),
    ({"meta.missing": {"exists": False}}, True),
    ({"meta.carrier": {"exists": True}}, True),
    ({"nothing": {"eq": None}}, False),
    ({"any": [{"from": "x"}, {"price": {"gte": 42}}]}, True),
    ({"all": [{"from": "x"}, {"price": {"gte": 42}}]}, False),
    ({"not": {"from": "x"}}, True),
    ({"__class__": "dict"}, False),
])
def test_matches(spec: dict, expected: bool) -> None:
    validate_filter(spec)
    assert matches(spec, EVENT) is expected


@pytest.mark.parametrize("spec", [
    [], {"any": []}, {"all": "x"}, {"a": {"gt": 1, "evil": "__import__('os')"}}, {"a": {"in": "abc"}}, {"": 1},
    {"not": 3},
])
def test_invalid_filters_are_refused(spec: object) -> None:
    with pytest.raises(InvalidInput):
        validate_filter(spec)
