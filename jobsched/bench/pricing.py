"""AWS list prices (us-east-1) and the arithmetic that turns measured usage into dollars per run.

Pure: no AWS calls, no clock. The usage figures come from the pipeline benchmark; here they are only
multiplied out, so the price sheet and the rounding rules can be checked by a table test.

Rules applied (as AWS bills them):

* DynamoDB on-demand: per write request unit (WRU) and read request unit (RRU); the units themselves are
  computed by :mod:`jobsched.aws.metering` (item sizes, index writes, consistency).
* SQS: per request, a request being each started 64 KiB of payload (the meter counts that).
* Lambda: per invocation, plus duration in GB-seconds: each invocation's duration is rounded *up* to
  the next millisecond and multiplied by the configured memory (arm64 price).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from jobsched.core.prices import MILLION, US_EAST_1, Prices  # one price sheet (usage estimates too)

__all__ = ["MILLION", "US_EAST_1", "Cost", "Prices", "Usage", "billed_gb_seconds", "cost_of"]


def billed_gb_seconds(durations_seconds: Iterable[float], memory_mb: int) -> float:
    """GB-seconds Lambda bills for invocations of the given durations at ``memory_mb``.

    Each duration is rounded up to a whole millisecond (Lambda's billing granularity) before summing.
    """
    if memory_mb <= 0:
        raise ValueError("memory_mb must be positive")
    billed_ms = sum(math.ceil(max(0.0, d) * 1000 - 1e-9) for d in durations_seconds)
    return billed_ms / 1000 * (memory_mb / 1024)


@dataclass(frozen=True)
class Usage:
    """What a set of runs consumed, in billing units."""

    wru: float = 0.0
    rru: float = 0.0
    sqs_requests: float = 0.0
    lambda_invocations: float = 0.0
    lambda_gb_seconds: float = 0.0

    def per_run(self, runs: int) -> Usage:
        """The same usage divided over ``runs`` (the figures the benchmark reports per successful run)."""
        if runs <= 0:
            raise ValueError("runs must be positive")
        return Usage(**{k: v / runs for k, v in asdict(self).items()})


@dataclass(frozen=True)
class Cost:
    """Dollars by line item; ``total`` is their sum."""

    dynamodb_writes: float
    dynamodb_reads: float
    sqs: float
    lambda_requests: float
    lambda_duration: float

    @property
    def total(self) -> float:
        return sum(asdict(self).values())

    def scaled(self, factor: float) -> Cost:
        return Cost(**{k: v * factor for k, v in asdict(self).items()})

    def to_dict(self, digits: int = 4) -> dict[str, float]:
        out = {k: round(v, digits) for k, v in asdict(self).items()}
        out["total"] = round(self.total, digits)
        return out


def cost_of(usage: Usage, prices: Prices = US_EAST_1) -> Cost:
    """Price ``usage`` line by line."""
    return Cost(
        dynamodb_writes=usage.wru * prices.dynamodb_wru,
        dynamodb_reads=usage.rru * prices.dynamodb_rru,
        sqs=usage.sqs_requests * prices.sqs_request,
        lambda_requests=usage.lambda_invocations * prices.lambda_request,
        lambda_duration=usage.lambda_gb_seconds * prices.lambda_gb_second,
    )


def cost_per_million_runs(usage: Usage, runs: int, prices: Prices = US_EAST_1) -> Cost:
    """What a million runs cost if each consumed ``usage / runs``."""
    return cost_of(usage.per_run(runs), prices).scaled(MILLION)
