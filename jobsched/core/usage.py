"""Usage per tenant and day: the counters, how they add up, and their estimated cost. Pure.

A worker invocation counts what it did per (tenant, UTC day) and adds it to that day's item once,
at the end of the invocation (:mod:`jobsched.services.usage`): attempts it started (executed a
handler for, or chunked runs it handed to their execution) and how each ended — succeeded, failed
(retried, dead-lettered or lost to a takeover) or cancelled, so that ``runs_started ==
runs_succeeded + runs_failed + runs_cancelled`` (:meth:`DayUsage.unaccounted`) — dead letters, the seconds
its handlers ran, the waits for a concurrency or rate limit, and the DynamoDB and SQS units its
requests for the tenant's runs used (the request meter of :mod:`jobsched.aws.metering`).

Since decision 0059 every function that serves tenants — the worker, the dispatcher, the sweeper and
the API — adds, once per invocation, the units of its requests made for each tenant, its share of the
requests made for no one tenant, and its share of the invocation's Lambda duration and request
charge (``lambda_gb_seconds``, ``lambda_requests``), split by the rule of
:meth:`jobsched.services.usage.TenantMeter.settle`. The estimated cost prices the units, the SQS
requests and the Lambda figures (:mod:`jobsched.core.prices`, us-east-1 list prices); an item with no
``lambda_gb_seconds`` (written before 0059) prices its handlers' seconds as Lambda duration at the
worker's memory instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from datetime import UTC, date, datetime
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.prices import US_EAST_1, Prices

#: Counter names, as stored and as the API answers them.
COUNTERS = (
    "runs_started",
    "runs_succeeded",
    "runs_failed",
    "runs_cancelled",
    "runs_dead_lettered",
    "run_seconds",
    "throttled_waits",
    "wru",
    "rru",
    "sqs_requests",
    "lambda_gb_seconds",
    "lambda_requests",
)

#: Counters that take fractions (shares of what an invocation did for several tenants).
FRACTIONAL = frozenset({"run_seconds", "wru", "rru", "sqs_requests", "lambda_gb_seconds", "lambda_requests"})


def day_of(instant: datetime) -> str:
    """The UTC day of an aware instant, ``YYYY-MM-DD``."""
    if instant.tzinfo is None:
        raise ValueError("usage days are taken from aware instants")
    return instant.astimezone(UTC).date().isoformat()


def parse_day(text: str, field: str) -> date:
    """``YYYY-MM-DD`` -> a date; :class:`ValidationError` naming ``field`` otherwise."""
    try:
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValidationError(f"{field} must be a day, YYYY-MM-DD, got {text!r}", field=field) from None


@dataclass
class DayUsage:
    """What one tenant's runs used on one UTC day (``memory_mb``: the worker's, for the estimate)."""

    tenant: str
    day: str
    runs_started: int = 0
    runs_succeeded: int = 0
    runs_failed: int = 0
    runs_cancelled: int = 0
    runs_dead_lettered: int = 0
    run_seconds: float = 0.0
    throttled_waits: int = 0
    wru: float = 0.0
    rru: float = 0.0
    sqs_requests: float = 0
    lambda_gb_seconds: float = 0.0
    lambda_requests: float = 0.0

    def add(self, name: str, value: float) -> None:
        setattr(self, name, getattr(self, name) + value)

    def unaccounted(self) -> int:
        """Started attempts not counted as ended: 0 when every attempt counted here ended in this
        day's counters (an attempt ending after midnight UTC, or whose outcome write failed, is not)."""
        return self.runs_started - (self.runs_succeeded + self.runs_failed + self.runs_cancelled)

    def is_empty(self) -> bool:
        return not any(getattr(self, name) for name in COUNTERS)

    def counters(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in COUNTERS}

    def estimated_usd(self, memory_mb: int, prices: Prices = US_EAST_1) -> float:
        """DynamoDB and SQS units at list prices, plus Lambda: ``lambda_gb_seconds`` and
        ``lambda_requests`` when the item has them (decision 0059), else the handlers' seconds as
        duration at the worker's ``memory_mb`` (an item written before 0059)."""
        gb_seconds = self.lambda_gb_seconds or self.run_seconds * (memory_mb / 1024)
        return (
            self.wru * prices.dynamodb_wru
            + self.rru * prices.dynamodb_rru
            + self.sqs_requests * prices.sqs_request
            + self.lambda_requests * prices.lambda_request
            + gb_seconds * prices.lambda_gb_second
        )

    def to_dict(self, memory_mb: int) -> dict[str, Any]:
        out = asdict(self)
        out["run_seconds"] = round(self.run_seconds, 3)
        out["wru"], out["rru"] = round(self.wru, 3), round(self.rru, 3)
        out["sqs_requests"] = round(self.sqs_requests, 3)
        out["lambda_gb_seconds"] = round(self.lambda_gb_seconds, 6)
        out["lambda_requests"] = round(self.lambda_requests, 3)
        out["estimated_usd"] = round(self.estimated_usd(memory_mb), 8)
        return out

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> DayUsage:
        names = {f.name for f in fields(cls)}

        def plain(name: str, value: Any) -> Any:
            if name in FRACTIONAL:
                return float(value)
            return int(value) if name in COUNTERS else value

        return cls(**{k: plain(k, v) for k, v in item.items() if k in names})
