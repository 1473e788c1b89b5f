"""Concurrency limits and rate limits: the specs a job declares and the arithmetic of both. Pure.

* A **concurrency limit** ``{"key": "...", "limit": N}`` lets at most N runs holding ``key`` (scoped
  to the tenant) execute at once. Its state is one semaphore item: a map holder -> lease end (epoch
  milliseconds); a holder whose lease end has passed no longer counts (a crashed worker's slot
  returns once its lease runs out). :func:`live_holders` and :func:`slot_frees_in` read that map.
* A **rate limit** ``{"key": "...", "per_second": R, "burst": B}`` is a token bucket, kept as GCRA
  (the generic cell rate algorithm): one number, ``tat`` (the theoretical arrival time of the next
  run, epoch ms). A run at ``now`` may start at ``max(now, tat - (B - 1) * T)`` with ``T = 1/R``, and
  taking it moves ``tat`` to ``max(tat, now) + T``: over any window of W seconds at most ``R * W + B``
  runs start. :func:`book` is that step; a run whose start is later is *booked* for it (its token is
  taken now, so a booked run never checks the bucket again, and the bucket never needs a re-check
  loop).

Both specs validate with a :class:`ValidationError` naming the field and what is allowed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobsched.core.errors import ValidationError

#: Largest concurrency limit a job or tenant may set (the semaphore item holds one entry per holder).
MAX_CONCURRENCY_LIMIT = 1000
#: Largest rate, runs per second, and largest burst.
MAX_PER_SECOND = 1000.0
MIN_PER_SECOND = 0.001  # one run per ~17 minutes
MAX_BURST = 1000
#: Keys: what a job names its shared limit by (an external system, a handler, a group of jobs).
KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$")
KEY_RULE = "1-128 characters: letters, digits and . _ : / @ - (starting with a letter or digit)"


@dataclass(frozen=True)
class ConcurrencySpec:
    """At most ``limit`` runs holding ``key`` execute at once (the key is scoped to the tenant)."""

    key: str
    limit: int

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "limit": self.limit}


@dataclass(frozen=True)
class RateSpec:
    """At most ``per_second`` runs per second start, with bursts of up to ``burst`` at once."""

    key: str
    per_second: float
    burst: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "per_second": self.per_second, "burst": self.burst}

    @property
    def interval_ms(self) -> float:
        """``T``: milliseconds between runs at the steady rate."""
        return 1000.0 / self.per_second


def _key(data: Mapping[str, Any], field: str, default_key: str) -> str:
    key = data.get("key", default_key)
    if not isinstance(key, str) or not KEY_PATTERN.match(key):
        raise ValidationError(f"{field}.key must be {KEY_RULE}, got {key!r}", field=field)
    return key


def _number(value: Any, field: str, low: float, high: float, *, whole: bool) -> float:
    kind = int if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        what = "a whole number" if whole else "a number"
        raise ValidationError(
            f"{field} must be {what} between {low:g} and {high:g}, got {value!r}", field=field.split(".")[0]
        )
    return float(value)


def concurrency_from(data: Any, default_key: str) -> ConcurrencySpec | None:
    """``{"key"?, "limit"}`` (or ``None``/``{}``: no limit); ``key`` defaults to ``default_key``."""
    if data is None or data == {}:
        return None
    if isinstance(data, ConcurrencySpec):
        return data
    if not isinstance(data, Mapping):
        raise ValidationError('concurrency must be {"key": "...", "limit": N}', field="concurrency")
    unknown = set(data) - {"key", "limit"}
    if unknown:
        raise ValidationError(
            f"unknown concurrency fields: {', '.join(sorted(unknown))}", field="concurrency"
        )
    if "limit" not in data:
        raise ValidationError("concurrency.limit is required", field="concurrency")
    limit = _number(data["limit"], "concurrency.limit", 1, MAX_CONCURRENCY_LIMIT, whole=True)
    return ConcurrencySpec(key=_key(data, "concurrency", default_key), limit=int(limit))


def rate_from(data: Any, default_key: str) -> RateSpec | None:
    """``{"key"?, "per_second", "burst"?}`` (or ``None``/``{}``: no limit)."""
    if data is None or data == {}:
        return None
    if isinstance(data, RateSpec):
        return data
    if not isinstance(data, Mapping):
        raise ValidationError(
            'rate_limit must be {"key": "...", "per_second": R, "burst": B}', field="rate_limit"
        )
    unknown = set(data) - {"key", "per_second", "burst"}
    if unknown:
        raise ValidationError(f"unknown rate_limit fields: {', '.join(sorted(unknown))}", field="rate_limit")
    if "per_second" not in data:
        raise ValidationError("rate_limit.per_second is required", field="rate_limit")
    rate = _number(data["per_second"], "rate_limit.per_second", MIN_PER_SECOND, MAX_PER_SECOND, whole=False)
    burst = _number(data.get("burst", 1), "rate_limit.burst", 1, MAX_BURST, whole=True)
    return RateSpec(key=_key(data, "rate_limit", default_key), per_second=rate, burst=int(burst))


# --- semaphores -------------------------------------------------------------------------------------


def live_holders(holders: Mapping[str, Any], now_ms: int) -> dict[str, int]:
    """The holders whose lease has not ended at ``now_ms`` (holder -> lease end, epoch ms)."""
    return {h: int(until) for h, until in holders.items() if int(until) > now_ms}


def expired_holders(holders: Mapping[str, Any], now_ms: int) -> dict[str, int]:
    """The holders whose lease ended at or before ``now_ms``: their slots are free."""
    return {h: int(until) for h, until in holders.items() if int(until) <= now_ms}


def slot_frees_in(holders: Mapping[str, Any], now_ms: int) -> float:
    """Seconds until the first live holder's lease ends (the latest a slot frees if nobody releases)."""
    live = live_holders(holders, now_ms)
    if not live:
        return 0.0
    return max(0.0, (min(live.values()) - now_ms) / 1000.0)


def oldest_waiter(waiters: Mapping[str, Any], now_ms: int) -> str | None:
    """The waiter registered first whose registration has not lapsed (the next one to wake)."""
    live = [(int(w["t"]), name) for name, w in waiters.items() if int(w.get("x", 0)) > now_ms]
    return min(live)[1] if live else None


def wait_seconds(frees_in: float, *, cap: float, jitter: float) -> int:
    """Visibility (whole seconds) for a run that waits for a slot: until the first holder's lease ends
    (plus a second), at most ``cap``, plus ``jitter`` (0..1 of a second), at least 1."""
    return max(1, min(math.ceil(cap), math.ceil(frees_in + 1 + jitter)))


# --- token buckets (GCRA) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Booking:
    """The bucket's answer at ``now_ms``: the run may start at ``start_ms`` and the bucket moves from
    ``old_tat`` (None: never used, or idle) to ``new_tat``."""

    start_ms: int
    old_tat: int | None
    new_tat: int

    def delay_seconds(self, now_ms: int) -> float:
        return max(0.0, (self.start_ms - now_ms) / 1000.0)


def book(spec: RateSpec, tat_ms: int | None, now_ms: int) -> Booking:
    """GCRA: the earliest start of one run at ``now_ms`` with the bucket at ``tat_ms``, and the new
    ``tat``. ``tat`` below ``now`` is an idle bucket (full: ``burst`` runs may start at once)."""
    interval = spec.interval_ms
    base = now_ms if tat_ms is None or tat_ms < now_ms else tat_ms
    tolerance = (spec.burst - 1) * interval
    start = max(now_ms, math.ceil(base - tolerance))
    return Booking(start_ms=start, old_tat=tat_ms, new_tat=math.ceil(base + interval))


def jittered(delay: float, spread: float, unit: float) -> float:
    """``delay`` plus ``unit`` (0..1, from the caller's random source) times ``spread`` seconds."""
    return delay + spread * unit
