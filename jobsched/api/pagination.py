"""Opaque page cursors and page-size limits.

A list answers ``{"items": [...], "next_cursor": "<opaque>" | null}``. The cursor is the base64url
form of ``{"v": <version>, "s": <scope>, "k": <DynamoDB LastEvaluatedKey>, "c": <checksum>}``:

- the version tag lets the key layout change without old cursors being misread;
- the scope names the list and the caller's partition (``"jobs:<tenant>"``), so a cursor cut from
  one list, or edited to point into another tenant's partition, is refused instead of being handed to
  DynamoDB as an ``ExclusiveStartKey``;
- the checksum catches a cursor that was truncated or edited by hand.

Anything that does not decode, check and match answers 400 (``bad_request``). Cursors are opaque,
not secret: they hold key values the caller may already see.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from jobsched.api.errors import BadRequestError

CURSOR_VERSION = 1
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
MAX_CURSOR_LENGTH = 2048


def _to_json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return {"$n": str(value)}
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    if isinstance(value, str | int | bool) or value is None:
        return value
    raise TypeError(f"a page key value must be JSON-able, got {type(value).__name__}")


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$n"} and isinstance(value["$n"], str):
            return Decimal(value["$n"])
        return {k: _from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _checksum(scope: str, key: Any) -> str:
    canonical = json.dumps([CURSOR_VERSION, scope, key], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def encode_cursor(key: Mapping[str, Any] | None, *, scope: str) -> str | None:
    """The opaque cursor for a DynamoDB ``LastEvaluatedKey``; ``None`` when there is no next page."""
    if not key:
        return None
    plain = _to_json(key)
    document = {"v": CURSOR_VERSION, "s": scope, "k": plain, "c": _checksum(scope, plain)}
    raw = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, *, scope: str) -> dict[str, Any] | None:
    """The ``ExclusiveStartKey`` a cursor stands for; ``None`` for the first page.

    Raises :class:`BadRequestError` for a cursor that was not issued for this list and caller."""
    if cursor is None or cursor == "":
        return None
    if len(cursor) > MAX_CURSOR_LENGTH:
        raise BadRequestError("cursor: not a cursor this API issued; pass next_cursor back unchanged")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        document = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError) as error:
        raise BadRequestError(
            "cursor: not a cursor this API issued; pass next_cursor back unchanged"
        ) from error
    if not isinstance(document, dict) or document.get("v") != CURSOR_VERSION:
        raise BadRequestError("cursor: unknown cursor version; start again from the first page")
    key = document.get("k")
    if not isinstance(key, dict) or not key or document.get("c") != _checksum(str(document.get("s")), key):
        raise BadRequestError("cursor: the cursor was altered; pass next_cursor back unchanged")
    if document.get("s") != scope:
        raise BadRequestError(
            "cursor: this cursor belongs to another list or filter; start from the first page"
        )
    return _from_json(key)


def page(items: list[Any], last_key: Mapping[str, Any] | None, *, scope: str) -> dict[str, Any]:
    """The list body every list route returns."""
    return {"items": items, "next_cursor": encode_cursor(last_key, scope=scope)}
