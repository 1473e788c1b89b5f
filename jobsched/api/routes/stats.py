"""``GET /stats``: the calling tenant's runs per time bucket by outcome, with start lag (decision 0061);
``GET /stats/queues``: the run queues' depth per time bucket, for administrators (decision 0064).

Read from the per-minute run statistics the sweeper adds (:mod:`jobsched.aws.run_stats_store`) and the
depth samples it takes (:mod:`jobsched.aws.queue_depths`): one Query of at most one small item per
minute of the range, whatever the number of runs.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import BaseModel, Field

from jobsched.api.deps import Admin, ClockDep, QueueDepthsDep, RunStatsDep, Tenant
from jobsched.api.schemas import Instant
from jobsched.core.errors import ValidationError
from jobsched.core.queue_depth import depth_buckets
from jobsched.core.run_stats import LAG_BOUNDS, MAX_BUCKETS, MAX_MINUTES, StatsRange, buckets, stats_range

router = Router()

From = Annotated[
    Instant | None,
    Query(
        alias="from",
        description="first instant, with an offset or Z, in the years 1970-9998, before to and at most "
        "7 days before it (default: to less an hour for minute buckets, a day for hour, 7 days for day)",
    ),
]
To = Annotated[
    Instant | None,
    Query(description="last instant, exclusive, with an offset or Z, in the years 1970-9998 (default now)"),
]
Bucket = Annotated[
    Literal["minute", "hour", "day"],
    Query(description=f"bucket width; at most {MAX_BUCKETS} buckets and {MAX_MINUTES // 1440} days per call"),
]

_DEFAULT_SPAN = {"minute": timedelta(hours=1), "hour": timedelta(days=1), "day": timedelta(days=7)}


class StatsBucketOut(BaseModel):
    start: datetime = Field(description="the bucket's first instant (UTC); it holds runs due from then")
    succeeded: int
    failed: int = Field(description="runs that ended failed (dead letters included)")
    cancelled: int
    skipped: int
    dead_lettered: int = Field(description="of the failed, those in the dead letters")
    dead_letters: int = Field(
        description="runs dead-lettered in this bucket (by the instant they were, not their due instant)"
    )
    lag_count: int = Field(description="scheduled runs that started: what the lag percentiles are of")
    lag_p50: float | None = Field(
        description="start lag (started - due), seconds: the upper bound of the bin holding the median"
    )
    lag_p99: float | None = Field(description="the same for the 99th percentile")
    lag_bins: list[int] = Field(description="scheduled runs started per lag bin (bounds: lag_bounds)")


class StatsOut(BaseModel):
    start: datetime = Field(description="from, aligned down to a whole bucket (UTC)")
    end: datetime = Field(description="to, aligned up to a whole bucket (exclusive)")
    bucket: Literal["minute", "hour", "day"]
    lag_bounds: list[float] = Field(
        description="upper bounds of the lag bins, seconds (the last: a day or more)"
    )
    buckets: list[StatsBucketOut] = Field(
        description="every bucket of the range, oldest first, empty ones too"
    )


def _aware(value: datetime | None, name: str) -> None:
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise ValidationError(f"{name}: needs a UTC offset or Z (e.g. 2026-11-01T00:00:00Z)", field=name)


def _span(from_: datetime | None, to: datetime | None, bucket: str, now: datetime) -> StatsRange:
    """The range asked for, its defaults filled in, checked and aligned to whole buckets."""
    _aware(from_, "from")
    _aware(to, "to")
    end = to or now
    if from_ is None:
        try:
            from_ = end - _DEFAULT_SPAN[bucket]
        except OverflowError:  # to=0001-01-01...: no default start before it
            raise ValidationError("to is too early to count back from; give from", field="to") from None
    return stats_range(from_, end, bucket)


@router.get("/stats", tags=["runs"], summary="Runs per time bucket by outcome, with start lag")
def run_stats(
    tenant: Tenant,
    store: RunStatsDep,
    clock: ClockDep,
    from_: From = None,
    to: To = None,
    bucket: Bucket = "minute",
) -> StatsOut:
    span = _span(from_, to, bucket, clock.now())
    return StatsOut(
        start=span.start,
        end=span.end,
        bucket=bucket,
        lag_bounds=list(LAG_BOUNDS),
        buckets=[StatsBucketOut(**b) for b in buckets(span, store.minutes(tenant, span))],
    )


class QueueFiguresOut(BaseModel):
    visible: int | None = Field(
        description="messages ready to be received (the backlog): the bucket's highest sample"
    )
    in_flight: int | None = Field(
        description="messages received and not yet deleted: the bucket's highest sample"
    )
    delayed: int | None = Field(
        description="messages sent ahead with a delay (runs queued before their due instant, retries "
        "waiting out their backoff): the bucket's highest sample"
    )


class DepthBucketOut(BaseModel):
    start: datetime = Field(description="the bucket's first instant (UTC)")
    samples: int = Field(description="samples taken in it (one per sweep); 0: every figure is null")
    queues: dict[str, QueueFiguresOut] = Field(
        description="per run queue (high, default, low, long, container)"
    )


class QueueDepthOut(BaseModel):
    start: datetime = Field(description="from, aligned down to a whole bucket (UTC)")
    end: datetime = Field(description="to, aligned up to a whole bucket (exclusive)")
    bucket: Literal["minute", "hour", "day"]
    queues: list[str] = Field(description="the run queues sampled")
    buckets: list[DepthBucketOut] = Field(
        description="every bucket of the range, oldest first, empty ones too"
    )


@router.get("/stats/queues", tags=["admin"], summary="The run queues' depth per time bucket (administrators)")
def queue_depth(
    admin: Admin,
    depths: QueueDepthsDep,
    clock: ClockDep,
    from_: From = None,
    to: To = None,
    bucket: Bucket = "minute",
) -> QueueDepthOut:
    span = _span(from_, to, bucket, clock.now())
    return QueueDepthOut(
        start=span.start,
        end=span.end,
        bucket=bucket,
        queues=list(depths.kinds),
        buckets=[DepthBucketOut(**b) for b in depth_buckets(span, depths.kinds, depths.samples(span))],
    )
