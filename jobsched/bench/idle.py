"""The idle figure: what registered jobs cost between their occurrences (issue 12 section 1).

Method (``run_idle``), in-process against moto exactly as the run-pipeline benchmark
(:mod:`jobsched.bench.environment`: every resource provisioned, SQS on the fake clock, the real
``functions.dispatcher`` and ``functions.sweeper`` handlers bound to it with a meter each):

1. **baseline day**: a fresh stack with no job; one simulated day (``hours``) of dispatcher ticks
   (every minute, one per shard, as the per-shard EventBridge schedules fire) and sweeps (every
   ``SWEEP_EVERY_MINUTES``, the sweeper's rate), metered. This is what the stack costs whatever the
   number of jobs (leases, the 32 due-partition queries, the ledger queries, the invocations);
2. ``jobs`` monthly crons (``0 0 1 * *``, UTC: midnight on the 1st) are created through the job
   service (the code behind ``POST /jobs``, with a meter of its own: creating a job is not idling);
3. **measured day**: the next simulated day, the same ticks and sweeps, metered. No occurrence of the
   jobs falls in either day (the days are in the middle of a month), so whatever the measured day
   consumes beyond the baseline day is what the registered jobs cost while idle;
4. per month = per day x 30; per million registered jobs = marginal / ``jobs`` x 1,000,000.

Requests are priced at the list prices of :mod:`jobsched.bench.pricing`; the goal (issue 12) is at most
$1 per million idle jobs per month in requests. **Storage** is shown apart: each job's item and its
due-index entry at DynamoDB Standard's $0.25 per GB-month, sizes as DynamoDB counts them (attribute
names + values, +100 bytes per item and per index entry). Lambda duration is measured with moto in the
process (an upper bound that moto's own time inflates: moto evaluates a GSI query by scanning the
table, so its query time grows with the jobs while DynamoDB's does not) and reported apart, not in the
request figure.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.aws.metering import item_size
from jobsched.bench.bindings import bind_functions, create_cron_jobs
from jobsched.bench.environment import bench_environment
from jobsched.bench.evidence import ApiCalls, Tally, register_bench_handler
from jobsched.bench.harness import Harness
from jobsched.bench.pipeline import SWEEP_EVERY_MINUTES
from jobsched.bench.pricing import MILLION, US_EAST_1, Usage, billed_gb_seconds, cost_of
from jobsched.core.clock import FakeClock
from jobsched.runtime import resources

#: A day in the middle of a month (no monthly occurrence in it or in the day before), midnight UTC.
DEFAULT_START = datetime(2026, 3, 10, 0, 0, tzinfo=UTC)
SCHEDULE = "0 0 1 * *"
DAYS_PER_MONTH = 30
GOAL_USD_PER_MILLION_JOBS_MONTH = 1.00
#: DynamoDB Standard table class storage, us-east-1 list price.
STORAGE_USD_PER_GB_MONTH = 0.25
#: DynamoDB's per-item storage overhead (table items and index entries alike).
ITEM_OVERHEAD_BYTES = 100


@dataclass(frozen=True)
class IdleConfig:
    """``jobs`` monthly crons, ``hours`` of ticks and sweeps per simulated day, ``shards`` shards."""

    jobs: int = 20_000
    hours: int = 24
    shards: int = resources.DEFAULT_SHARDS
    start: datetime = DEFAULT_START

    def validate(self) -> None:
        if self.jobs < 1:
            raise ValueError("jobs must be at least 1")
        if not 1 <= self.hours <= 24:
            raise ValueError("hours must be 1..24")


def _usage(tally: Tally, memory: dict[str, int]) -> tuple[Usage, dict[str, dict[str, int]]]:
    wru, rru, sqs = tally.totals()
    lambdas = {name: use for name, use in tally.functions.items()}
    usage = Usage(
        wru=wru,
        rru=rru,
        sqs_requests=sqs,
        lambda_invocations=sum(u.invocations for u in lambdas.values()),
        lambda_gb_seconds=sum(billed_gb_seconds(u.durations, memory[n]) for n, u in lambdas.items()),
    )
    requests = {
        name: {op: u.requests for op, u in sorted(use.operations.items())}
        for name, use in sorted(tally.functions.items())
    }
    return usage, requests


def _simulate_day(harness: Harness, clock: FakeClock, start: datetime, hours: float, shards: int) -> None:
    """``hours`` of minutes from ``start``: every minute a tick per shard, every sweeper period a sweep."""
    for minute in range(int(hours * 60)):
        clock.set(start + timedelta(minutes=minute))
        harness.tick(shards)
        if minute % SWEEP_EVERY_MINUTES == SWEEP_EVERY_MINUTES - 1:
            harness.sweep()


def _timing(tally: Tally, calls: ApiCalls) -> dict[str, dict[str, float]]:
    """Per function, ms per invocation: in all, inside AWS calls (moto), and outside them (our code)."""
    out = {}
    for name, use in sorted(tally.functions.items()):
        n = max(use.invocations, 1)
        total = 1000 * use.handler_seconds / n
        inside = 1000 * calls.seconds.get(name, 0.0) / n
        out[name] = {
            "per_invocation": round(total, 3),
            "in_aws_calls": round(inside, 3),
            "outside_aws_calls": round(total - inside, 3),
        }
    return out


def _request_usd(usage: Usage) -> float:
    """Requests only (DynamoDB units, SQS, Lambda invocations): the figure the goal is about."""
    cost = cost_of(usage, US_EAST_1)
    return cost.total - cost.lambda_duration


def _day_figures(usage: Usage, requests: dict[str, dict[str, int]], scale: float) -> dict[str, Any]:
    """A day's usage as monthly figures, times ``scale`` (1 for the stack, 1e6 / jobs per million jobs)."""
    month = DAYS_PER_MONTH * scale
    cost = cost_of(usage, US_EAST_1)
    return {
        "requests_per_month": round(sum(n for ops in requests.values() for n in ops.values()) * month, 3),
        "wru_per_month": round(usage.wru * month, 3),
        "rru_per_month": round(usage.rru * month, 3),
        "lambda_invocations_per_month": round(usage.lambda_invocations * month, 3),
        "usd_requests_per_month": round(_request_usd(usage) * month, 6),
        "usd_lambda_duration_per_month": round(cost.lambda_duration * month, 6),
    }


def _difference(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Requests in ``a`` beyond ``b``, per function and operation (only the non-zero differences)."""
    out: dict[str, dict[str, int]] = {}
    for name in sorted(set(a) | set(b)):
        ops = {
            op: a.get(name, {}).get(op, 0) - b.get(name, {}).get(op, 0)
            for op in sorted(set(a.get(name, {})) | set(b.get(name, {})))
        }
        ops = {op: n for op, n in ops.items() if n}
        if ops:
            out[name] = ops
    return out


def _storage(dynamodb: Any, table: str) -> dict[str, float]:
    """Average stored bytes per job: its item and its due-index entry (keys projected), with overhead."""
    items = 0
    item_bytes = 0
    index_bytes = 0
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for wire in page.get("Items", []):
            items += 1
            item_bytes += item_size(wire) + ITEM_OVERHEAD_BYTES
            if "due_shard" in wire and "due_at" in wire:
                keys = {k: wire[k] for k in ("tenant", "job_id", "due_shard", "due_at")}
                index_bytes += item_size(keys) + ITEM_OVERHEAD_BYTES
    per_job = (item_bytes + index_bytes) / max(items, 1)
    gb = per_job * MILLION / 2**30
    return {
        "items": items,
        "bytes_per_job": round(per_job, 1),
        "item_bytes_per_job": round(item_bytes / max(items, 1), 1),
        "due_index_bytes_per_job": round(index_bytes / max(items, 1), 1),
        "gb_per_million_jobs": round(gb, 4),
        "usd_per_million_jobs_per_month": round(gb * STORAGE_USD_PER_GB_MONTH, 4),
        "usd_per_gb_month": STORAGE_USD_PER_GB_MONTH,
    }


def run_idle(config: IdleConfig | None = None) -> dict[str, Any]:
    """Run the idle benchmark (module docstring); return its figures (the ``idle`` JSON object)."""
    config = config or IdleConfig()
    config.validate()
    handler = register_bench_handler("summary")
    started = time.perf_counter()
    clock = FakeClock(config.start - timedelta(days=2))
    memory = {spec.name: spec.memory_mb for spec in resources.FUNCTIONS}
    with (
        bench_environment(config.shards, clock) as (clients, provisioned),
        ApiCalls().active() as calls,
        bind_functions(clock) as functions,
    ):
        harness = Harness(functions, clients, provisioned, calls)
        # Warm-up, not counted: the first ticks create the lease items, the functions initialise.
        _simulate_day(
            harness, clock, config.start - timedelta(days=2), 2 * SWEEP_EVERY_MINUTES / 60, config.shards
        )
        harness.reset_tally()
        _simulate_day(harness, clock, config.start - timedelta(days=1), config.hours, config.shards)
        baseline, baseline_requests = _usage(harness.tally, memory)
        baseline_timing = _timing(harness.tally, calls)
        baseline_seconds = time.perf_counter() - started
        clock.set(config.start - timedelta(minutes=30))
        create_started = time.perf_counter()
        create_cron_jobs(
            count=config.jobs, schedule=SCHEDULE, handler=handler, payload={"n": 1}, now=clock.now()
        )
        create_seconds = time.perf_counter() - create_started
        harness.reset_tally()
        _simulate_day(harness, clock, config.start, config.hours, config.shards)
        measured, measured_requests = _usage(harness.tally, memory)
        measured_timing = _timing(harness.tally, calls)
        unmetered = calls.unmetered(harness.tally)
        jobs_table = provisioned.tables[resources.ENV_JOBS_TABLE]
        storage = _storage(clients["dynamodb"], jobs_table)
        # Runs only: the table's other partitions (the sweeper's queue-depth samples, `depth#queues`;
        # statistics, feed) have a '#' in their job_id, which no job id has.
        runs = clients["dynamodb"].scan(
            TableName=provisioned.tables[resources.ENV_RUNS_TABLE],
            Select="COUNT",
            FilterExpression="NOT contains(job_id, :marker)",
            ExpressionAttributeValues={":marker": {"S": "#"}},
        )
    day_scale = 24 / config.hours  # a shorter simulated day is scaled to 24 h
    marginal = Usage(
        wru=measured.wru - baseline.wru,
        rru=measured.rru - baseline.rru,
        sqs_requests=measured.sqs_requests - baseline.sqs_requests,
        lambda_invocations=measured.lambda_invocations - baseline.lambda_invocations,
        lambda_gb_seconds=measured.lambda_gb_seconds - baseline.lambda_gb_seconds,
    )
    extra = _difference(measured_requests, baseline_requests)
    per_million = MILLION / config.jobs
    per_job = _day_figures(_scaled(marginal, day_scale), _scaled_requests(extra, day_scale), per_million)
    usd = per_job["usd_requests_per_month"]
    return {
        "jobs": config.jobs,
        "schedule": SCHEDULE,
        "shards": config.shards,
        "simulated_hours": config.hours,
        "ticks_per_day": config.hours * 60 * config.shards,
        "sweeps_per_day": config.hours * 60 // SWEEP_EVERY_MINUTES,
        "runs_created": int(runs["Count"]) if "Count" in runs else None,
        "baseline_requests_per_day": _scaled_requests(baseline_requests, day_scale),
        "measured_requests_per_day": _scaled_requests(measured_requests, day_scale),
        "extra_requests_per_day": _scaled_requests(extra, day_scale),
        "per_million_jobs": per_job,
        "usd_requests_per_million_jobs_per_month": usd,
        "goal_usd_per_million_jobs_per_month": GOAL_USD_PER_MILLION_JOBS_MONTH,
        "goal_met": bool(usd <= GOAL_USD_PER_MILLION_JOBS_MONTH and not unmetered),
        "stack": _day_figures(
            _scaled(baseline, day_scale), _scaled_requests(baseline_requests, day_scale), 1
        ),
        "storage": storage,
        "handler_ms": {"baseline": baseline_timing, "measured": measured_timing},
        "unmetered_calls": unmetered,
        "setup": {
            "start": config.start.isoformat(),
            "days_per_month": DAYS_PER_MONTH,
            "sweep_every_minutes": SWEEP_EVERY_MINUTES,
            "create_seconds": round(create_seconds, 2),
            "baseline_day_seconds": round(baseline_seconds, 2),
            "elapsed_seconds": round(time.perf_counter() - started, 2),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "lambda_duration": "wall time with moto in-process (its GSI queries scan the table): "
            "reported apart, not in the request figure",
        },
    }


def _scaled(usage: Usage, factor: float) -> Usage:
    return Usage(
        wru=usage.wru * factor,
        rru=usage.rru * factor,
        sqs_requests=usage.sqs_requests * factor,
        lambda_invocations=usage.lambda_invocations * factor,
        lambda_gb_seconds=usage.lambda_gb_seconds * factor,
    )


def _scaled_requests(requests: dict[str, dict[str, int]], factor: float) -> dict[str, dict[str, Any]]:
    return {name: {op: round(n * factor, 3) for op, n in ops.items()} for name, ops in requests.items()}
