"""Opaque cursors: they round-trip, and an altered or foreign one is a 400, never a DynamoDB call."""

from __future__ import annotations

import base64
import json
import re
from decimal import Decimal

import pytest

from jobsched.api.errors import BadRequestError
from jobsched.api.pagination import decode_cursor, encode_cursor, page

KEY = {"tenant": "acme", "tenant_sort": "20260302T120000.000Z#job1", "job_id": "job1", "n": Decimal("17")}


def test_cursor_round_trips_the_key_with_its_number_types():
    cursor = encode_cursor(KEY, scope="runs:acme")
    assert decode_cursor(cursor, scope="runs:acme") == KEY


def test_cursor_is_url_safe_and_opaque():
    cursor = encode_cursor(KEY, scope="runs:acme")
    assert cursor is not None
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert "acme" not in cursor


def test_no_last_key_means_no_next_cursor():
    assert page([1, 2], None, scope="jobs:acme") == {"items": [1, 2], "next_cursor": None}


def test_a_cursor_from_another_scope_is_refused():
    cursor = encode_cursor(KEY, scope="runs:acme")
    with pytest.raises(BadRequestError, match="another list"):
        decode_cursor(cursor, scope="runs:globex")


def test_an_edited_cursor_is_refused():
    # Given a cursor whose key was edited to point into another tenant's partition
    cursor = encode_cursor(KEY, scope="runs:acme")
    document = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    document["k"]["tenant"] = "globex"
    forged = base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")
    # Then it is refused as altered
    with pytest.raises(BadRequestError, match="altered"):
        decode_cursor(forged, scope="runs:acme")


@pytest.mark.parametrize("garbage", ["x", "!!!!", "e30", "bnVsbA", "a" * 5000])
def test_garbage_cursors_are_refused(garbage):
    with pytest.raises(BadRequestError):
        decode_cursor(garbage, scope="runs:acme")


def test_empty_cursor_means_the_first_page():
    assert decode_cursor("", scope="runs:acme") is None
    assert decode_cursor(None, scope="runs:acme") is None


@pytest.mark.parametrize(
    "key",
    [
        KEY,
        {"job_id": "j", "run_key": "x"},
        {"tenant": "t" * 64, "tenant_sort": "9" * 200, "n": Decimal("-1.5")},
    ],
)
def test_every_issued_cursor_matches_the_documented_pattern(key):
    """Given the pattern the OpenAPI document gives cursors (issue 27 §5: "any string" let a fuzzer send
    '0000...' as a valid cursor), Then every cursor the API issues, for any key and scope, matches it."""
    from jobsched.api.contract import CURSOR_PATTERN

    for scope in ("runs:acme", "jobs:a-very-long-tenant-name", "dead-letters:acme:job1::"):
        assert re.match(CURSOR_PATTERN, encode_cursor(key, scope=scope) or "")
    assert re.match(CURSOR_PATTERN, "")  # the first page


@pytest.mark.parametrize("forged", ["0" * 64, "9v9c", "suzzRz", "e30", "eyJ2IjoxfQ"])
def test_strings_the_old_pattern_let_through_are_outside_the_new_one(forged):
    """Given cursors a fuzzer drew from the old pattern (each refused by the API), Then the documented
    pattern no longer calls them valid."""
    from jobsched.api.contract import CURSOR_PATTERN

    assert not re.match(CURSOR_PATTERN, forged)
    with pytest.raises(BadRequestError):
        decode_cursor(forged, scope="runs:acme")
