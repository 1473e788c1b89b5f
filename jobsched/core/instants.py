"""Instants and plain item values: aware datetimes only, ISO and epoch forms, DynamoDB numbers as ints.

Part of the data model's vocabulary (:mod:`jobsched.core.models` re-exports every public name). Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from jobsched.core.errors import ValidationError

# --- instants ------------------------------------------------------------------------------------


def require_aware(value: datetime, what: str = "instant") -> datetime:
    """Return ``value`` unchanged if it is timezone-aware; naive datetimes are a bug, never guessed."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{what} must be timezone-aware, got naive {value.isoformat()}")
    return value


def to_iso(value: datetime) -> str:
    """Aware datetime -> ``2026-11-29T20:45:00.123Z`` (UTC, millisecond precision, always the same length)."""
    utc = require_aware(value).astimezone(UTC)
    return f"{utc.year:04d}" + utc.strftime("-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def from_iso(text: str) -> datetime:
    """Parse an ISO 8601 instant with an offset or ``Z``; naive strings are rejected."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"not an ISO 8601 instant: {text!r}") from exc
    return require_aware(parsed, f"instant {text!r}").astimezone(UTC)


def to_epoch_ms(value: datetime) -> int:
    """Aware datetime -> integer epoch milliseconds (the due index sort key)."""
    return int(require_aware(value).timestamp() * 1000)


def from_epoch_ms(value: int | Decimal) -> datetime:
    return datetime.fromtimestamp(int(value) / 1000, tz=UTC)


def _opt_iso(value: datetime | None) -> str | None:
    return to_iso(value) if value is not None else None


def _opt_dt(value: Any) -> datetime | None:
    return from_iso(value) if value else None


def _plain(value: Any) -> Any:
    """DynamoDB returns numbers as Decimal; give callers ints/floats back (recursively)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _compact(item: dict[str, Any]) -> dict[str, Any]:
    """Drop attributes that carry nothing: absent attributes are free, empty ones are billed bytes."""
    return {k: v for k, v in item.items() if v is not None and v != [] and v != {} and v is not False}
