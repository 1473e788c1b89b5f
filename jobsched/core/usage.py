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

Since the amendment of 0059 the items also count what is billed outside the functions' requests: the
Step Functions state transitions of a tenant's chunked runs (``sfn_transitions``), the SNS publishes
made for it (``sns_publishes``, per started 64 KB), the Fargate time of its runs on the container pool
(``fargate_vcpu_seconds``, ``fargate_gb_seconds``: a task's seconds split between the runs it holds at
once, :class:`TaskTime`), and the DLQ consumer's requests and duration. What serves no tenant at all
(the capacity function, the event source mappings' empty polls) is counted on a deployment row,
tenant :data:`DEPLOYMENT`, so the tenants' rows and that row are the whole bill.
"""

from __future__ import annotations

import math
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
    "sfn_transitions",
    "sns_publishes",
    "fargate_vcpu_seconds",
    "fargate_gb_seconds",
)

#: Counters that take fractions (shares of what an invocation did for several tenants).
FRACTIONAL = frozenset(
    {
        "run_seconds",
        "wru",
        "rru",
        "sqs_requests",
        "lambda_gb_seconds",
        "lambda_requests",
        "sfn_transitions",
        "sns_publishes",
        "fargate_vcpu_seconds",
        "fargate_gb_seconds",
    }
)

#: The tenant of the deployment row: what serves no tenant (the capacity function, the event source
#: mappings' empty polls). A tenant name starts with a letter or a digit, so no tenant can be it.
DEPLOYMENT = "@deployment"

#: SNS bills a publish per started 64 KB of its payload (message and attributes).
SNS_CHUNK_BYTES = 64 * 1024
#: Lambda's SQS event source mapping keeps this many long polls open per queue while the queue is
#: idle (AWS Lambda Developer Guide, "Using Lambda with Amazon SQS": five pollers to begin with), each
#: waiting :data:`MAPPING_POLL_SECONDS` (the longest long poll) before it returns empty.
MAPPING_POLLERS = 5
MAPPING_POLL_SECONDS = 20


def sns_publish_requests(payload_bytes: int) -> int:
    """Publish requests SNS bills for one message of ``payload_bytes``: one per started 64 KB."""
    return max(1, math.ceil(max(0, payload_bytes) / SNS_CHUNK_BYTES))


def fargate_usage(seconds: float, cpu_units: int, memory_mib: int) -> tuple[float, float]:
    """(vCPU-seconds, GB-seconds) a Fargate task of ``cpu_units`` (1024 = 1 vCPU) and ``memory_mib``
    is billed for ``seconds``."""
    if cpu_units <= 0 or memory_mib <= 0:
        raise ValueError("a Fargate task has a positive cpu and memory")
    seconds = max(0.0, seconds)
    return seconds * cpu_units / 1024, seconds * memory_mib / 1024


def empty_polls(mappings: int, seconds: float) -> float:
    """Receives the event source mappings of ``mappings`` idle queues make in ``seconds``: each keeps
    :data:`MAPPING_POLLERS` long polls of :data:`MAPPING_POLL_SECONDS` open."""
    return max(0, mappings) * MAPPING_POLLERS * max(0.0, seconds) / MAPPING_POLL_SECONDS


class TaskTime:
    """A task's elapsed seconds split between the deliveries it holds at once (the weight rule of
    decision 0059, each delivery weighing 1): each interval between two changes goes in equal parts to
    the deliveries held during it; an interval with none held is the task's idle time. Pure: instants
    are passed in (monotonic seconds)."""

    def __init__(self, start: float):
        self.at = start
        self.held: dict[str, float] = {}
        self.idle = 0.0

    def _advance(self, now: float) -> None:
        elapsed, self.at = max(0.0, now - self.at), max(self.at, now)
        if self.held:
            share = elapsed / len(self.held)
            for key in self.held:
                self.held[key] += share
        else:
            self.idle += elapsed

    def begin(self, key: str, now: float) -> None:
        """A delivery ``key`` is held from ``now``."""
        self._advance(now)
        self.held.setdefault(key, 0.0)

    def end(self, key: str, now: float) -> float:
        """The delivery ``key`` ends at ``now``: its share of the task's seconds while it was held."""
        self._advance(now)
        return self.held.pop(key, 0.0)

    def take_idle(self, now: float) -> float:
        """The idle seconds up to ``now`` not taken before."""
        self._advance(now)
        idle, self.idle = self.idle, 0.0
        return idle


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
    sfn_transitions: float = 0.0
    sns_publishes: float = 0.0
    fargate_vcpu_seconds: float = 0.0
    fargate_gb_seconds: float = 0.0

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
        duration at the worker's ``memory_mb`` (an item written before 0059); plus Step Functions
        transitions, SNS publishes and Fargate vCPU- and GB-seconds (0059 amended)."""
        gb_seconds = self.lambda_gb_seconds or self.run_seconds * (memory_mb / 1024)
        return (
            self.wru * prices.dynamodb_wru
            + self.rru * prices.dynamodb_rru
            + self.sqs_requests * prices.sqs_request
            + self.lambda_requests * prices.lambda_request
            + gb_seconds * prices.lambda_gb_second
            + self.sfn_transitions * prices.sfn_transition
            + self.sns_publishes * prices.sns_publish
            + self.fargate_vcpu_seconds * prices.fargate_vcpu_second
            + self.fargate_gb_seconds * prices.fargate_gb_second
        )

    def to_dict(self, memory_mb: int) -> dict[str, Any]:
        out = asdict(self)
        out["run_seconds"] = round(self.run_seconds, 3)
        out["wru"], out["rru"] = round(self.wru, 3), round(self.rru, 3)
        out["sqs_requests"] = round(self.sqs_requests, 3)
        out["lambda_gb_seconds"] = round(self.lambda_gb_seconds, 6)
        out["lambda_requests"] = round(self.lambda_requests, 3)
        out["sfn_transitions"] = round(self.sfn_transitions, 3)
        out["sns_publishes"] = round(self.sns_publishes, 3)
        out["fargate_vcpu_seconds"] = round(self.fargate_vcpu_seconds, 3)
        out["fargate_gb_seconds"] = round(self.fargate_gb_seconds, 3)
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
