"""The burst figure (issue 12 §3): N jobs due in the same minute, enqueued ahead through the
dispatcher's paging, at the requests per run of the steady state.

What runs (``run_burst``), in-process against moto as the run-pipeline benchmark
(:mod:`jobsched.bench.pipeline`: same provisioning, fake clock, real dispatcher, worker and sweeper
handlers through :class:`jobsched.bench.harness.Harness`, 4 shards by default):

1. ``jobs`` daily crons ``0 9 * * *`` (1 KB payload, ``bench.summary``) are created through the job
   service at 08:50 of the simulated day: every one is due at 09:00:00 — the thundering herd of a daily
   report for every customer;
2. simulated minutes from 08:55: at each, the clock set to it, one tick per shard, the queues drained,
   the sweeper every 5 minutes; the tally restarts at 08:59, the first tick whose look-ahead (60 s)
   reaches 09:00;
3. the evidence: each run's record (``created_at`` against its due instant: *ahead* when created before
   09:00, else *late*), the handler's own record of each execution (lost, duplicates), and per tick the
   runs it created (``ticks_needed``: the shard ticks that created any).

The same is done first with ``reference_jobs`` (default 100: the run-pipeline benchmark's rate of 100 runs
a minute) as the steady state of this workload, so the per-run figures of the burst are held against
the same jobs, code and counting at the ordinary rate (``steady``). The pipeline's headline figure
(per-minute crons) is a different workload: a per-minute job is advanced once per 5 runs, a daily job
once per run.

moto's SQS is made to send in constant time first (:mod:`jobsched.local.moto_fixes`): as shipped it
scans every queued message for each message sent, and ten thousand delayed messages made each send
seconds long. moto still answers a due-index ``Query`` by scanning the table, so each tick's 8
partition queries take time in proportion to the jobs stored: a measurement of 10,000 jobs takes
minutes (docs/performance.md). Time does not enter the figures: requests and units are counted, and the
fake clock does not move during a tick. What a tick of a burst takes on AWS is modelled from its
counted requests (``aws_model``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.aws.metering import deserialize
from jobsched.bench.bindings import bind_functions, create_cron_jobs, function_module
from jobsched.bench.environment import bench_environment
from jobsched.bench.evidence import EXECUTIONS, ApiCalls, register_bench_handler, unsuccessful
from jobsched.bench.harness import ESM, Harness
from jobsched.bench.pipeline import SWEEP_EVERY_MINUTES, bench_payload
from jobsched.bench.pricing import Usage, billed_gb_seconds, cost_per_million_runs
from jobsched.compose.seam import Parts
from jobsched.core.clock import FakeClock
from jobsched.core.models import make_run_id
from jobsched.local import moto_fixes
from jobsched.runtime import resources

SCHEDULE = "0 9 * * *"
#: 09:00 UTC on a Monday: when every job of the burst is due. Never the wall clock.
DUE = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
CREATED = DUE - timedelta(minutes=10)
FIRST_MINUTE = DUE - timedelta(minutes=5)
MEASURED_FROM = DUE - timedelta(minutes=1)
#: Minutes simulated from the first measured one (08:59, 09:00, 09:01): all due runs end by then.
MEASURED_MINUTES = 3
DEFAULT_JOBS = 1000
REFERENCE_JOBS = 100
#: DynamoDB single-item requests (same Region, on-demand) and SendMessageBatch, seconds, low and high:
#: the latency assumptions of the AWS model of a tick (docs/decisions/0029-async-backfill.md).
DYNAMODB_SECONDS = (0.005, 0.010)
SQS_BATCH_SECONDS = (0.010, 0.030)


@dataclass(frozen=True)
class BurstConfig:
    jobs: int = DEFAULT_JOBS
    shards: int = resources.DEFAULT_SHARDS
    payload_bytes: int = 1024
    reference_jobs: int = REFERENCE_JOBS  # 0: no steady-state reference
    page_size: int | None = None  # jobs per dispatcher page (None: the deployment's, 100)


def run_burst(config: BurstConfig | None = None) -> dict[str, Any]:
    """The burst figure and its steady-state reference (see the module docstring); the JSON
    ``jobsched bench --burst`` prints under ``burst``."""
    config = config or BurstConfig()
    if config.jobs < 1 or config.reference_jobs < 0:
        raise ValueError("jobs must be at least 1 and reference_jobs at least 0")
    moto_fixes.apply()
    started = time.perf_counter()
    burst = _one_minute(config.jobs, config)
    out: dict[str, Any] = {**burst, "schedule": SCHEDULE, "due_at": DUE.isoformat()}
    if config.reference_jobs:
        steady = _one_minute(config.reference_jobs, config)
        out["steady"] = {k: steady[k] for k in ("runs", "succeeded", "lost", "duplicates", "per_run")}
        out["steady"]["operations_per_run"] = steady["operations_per_run"]
        out["per_run_vs_steady"] = {
            k: _ratio(burst["per_run"][k], steady["per_run"][k])
            for k in ("wru", "rru", "sqs_requests", "dynamodb_requests")
        }
    out["elapsed_seconds"] = round(time.perf_counter() - started, 1)
    out["load_average_1m"] = round(os.getloadavg()[0], 2)
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 4)


def _one_minute(jobs: int, config: BurstConfig) -> dict[str, Any]:
    """``jobs`` crons due at :data:`DUE`, simulated from 08:55 to 09:01; their figures."""
    handler = register_bench_handler("summary")
    clock = FakeClock(CREATED)
    ticks: list[dict[str, Any]] = []
    with (
        bench_environment(config.shards, clock) as (clients, provisioned),
        ApiCalls().active() as calls,
        bind_functions(clock) as functions,
        _pages_of(config.page_size),
    ):
        created_started = time.perf_counter()
        job_ids = create_cron_jobs(
            count=jobs,
            schedule=SCHEDULE,
            handler=handler,
            payload=bench_payload(config.payload_bytes),
            now=clock.now(),
        )
        creation_seconds = time.perf_counter() - created_started
        EXECUTIONS.clear()
        harness = Harness(functions, clients, provisioned, calls)
        minute = FIRST_MINUTE
        index = 0
        end = MEASURED_FROM + timedelta(minutes=MEASURED_MINUTES)
        while minute < end:
            if minute == MEASURED_FROM:
                harness.reset_tally()
            clock.set(minute)
            for shard in range(config.shards):
                tick_started = time.perf_counter()
                summary = harness.invoke("dispatcher", {"shard": shard, "shards": config.shards})
                ticks.append(
                    {
                        "at": minute.isoformat(),
                        "shard": shard,
                        "runs_created": summary["runs_created"],
                        "jobs_seen": summary["jobs_seen"],
                        "seconds": round(time.perf_counter() - tick_started, 3),
                    }
                )
            harness.drain()
            if index % SWEEP_EVERY_MINUTES == SWEEP_EVERY_MINUTES - 1:
                harness.sweep()
            minute += timedelta(minutes=1)
            index += 1
        records = _run_records(clients["dynamodb"], provisioned.tables[resources.ENV_RUNS_TABLE])
    return _figures(jobs, config, job_ids, records, harness, calls, ticks, creation_seconds)


@contextmanager
def _pages_of(page_size: int | None) -> Iterator[None]:
    """While active, the dispatcher the function builds (from what its seam holds) pages its due jobs
    ``page_size`` at a time."""
    if page_size is None:
        yield
        return
    function = function_module("dispatcher")

    def paged(parts: Parts) -> Any:
        settings, dispatcher, usage = function.build(parts)
        dispatcher.config = replace(dispatcher.config, page_size=page_size)
        return settings, dispatcher, usage

    with function.seam.installed(build=paged):
        yield


def _run_records(dynamodb: Any, table: str) -> dict[str, dict[str, Any]]:
    """run id -> its item, read straight from the table (unmetered: reading back is no run's cost)."""
    out: dict[str, dict[str, Any]] = {}
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for wire in page.get("Items", []):
            item = deserialize(wire)
            if "state" in item and "scheduled_at" in item:
                out[f"{item['job_id']}.{item['run_key']}"] = item
    return out


def _figures(
    jobs: int,
    config: BurstConfig,
    job_ids: list[str],
    records: dict[str, dict[str, Any]],
    harness: Harness,
    calls: ApiCalls,
    ticks: list[dict[str, Any]],
    creation_seconds: float,
) -> dict[str, Any]:
    expected = [make_run_id(job_id, DUE) for job_id in job_ids]
    executed = EXECUTIONS.per_run()
    states = {run_id: str(item["state"]) for run_id, item in records.items()}
    not_succeeded = unsuccessful(expected, states, executed)
    due_iso = DUE.isoformat().replace("+00:00", "Z")
    ahead = late = 0
    for run_id in expected:
        item = records.get(run_id)
        if item is None:
            continue
        created = datetime.fromisoformat(str(item["created_at"]).replace("Z", "+00:00"))
        ahead += created < DUE
        late += created >= DUE
    extra = sorted(set(records) - set(expected))
    succeeded = len(expected) - len(not_succeeded)
    tally = harness.tally
    memory = {spec.name: spec.memory_mb for spec in resources.FUNCTIONS}
    wru, rru, sqs_requests = tally.totals()
    lambda_uses = {name: use for name, use in tally.functions.items() if name != ESM}
    usage = Usage(
        wru=wru,
        rru=rru,
        sqs_requests=sqs_requests,
        lambda_invocations=sum(use.invocations for use in lambda_uses.values()),
        lambda_gb_seconds=sum(billed_gb_seconds(u.durations, memory[n]) for n, u in lambda_uses.items()),
    )
    n = max(succeeded, 1)
    dynamodb_requests = sum(
        op.requests
        for use in tally.functions.values()
        for name, op in use.operations.items()
        if name.startswith("dynamodb.")
    )
    operations = {
        function: {name: round(op.requests / n, 4) for name, op in sorted(use.operations.items())}
        for function, use in sorted(tally.functions.items())
    }
    measured_ticks = [t for t in ticks if t["at"] >= MEASURED_FROM.isoformat()]
    creating = [t for t in ticks if t["runs_created"]]
    cost = cost_per_million_runs(usage, succeeded) if succeeded else None
    return {
        "jobs": jobs,
        "shards": config.shards,
        "page_size": config.page_size or 100,
        "runs": len(expected),
        "succeeded": succeeded,
        "lost": len(not_succeeded),
        "duplicates": EXECUTIONS.duplicates(),
        "unexpected_runs": len(extra),
        "enqueued_ahead": ahead,
        "enqueued_late": late,
        "ticks_needed": len(creating),
        "minutes_needed": len({t["at"] for t in creating}),
        "ticks": [t for t in measured_ticks if t["jobs_seen"] or t["runs_created"]],
        "per_run": {
            "wru": round(wru / n, 4),
            "rru": round(rru / n, 4),
            "sqs_requests": round(sqs_requests / n, 4),
            "dynamodb_requests": round(dynamodb_requests / n, 4),
            "lambda_invocations": round(usage.lambda_invocations / n, 5),
            "usd_per_million_runs_requests": (
                round(cost.total - cost.lambda_duration, 4) if cost is not None else None
            ),
        },
        "operations_per_run": operations,
        "aws_model": _aws_model(tally, creating, config.shards),
        "unmetered_calls": calls.unmetered(tally),
        "job_creation_seconds": round(creation_seconds, 1),
        "due_at_iso": due_iso,
    }


def _aws_model(tally: Any, creating: list[dict[str, Any]], shards: int) -> dict[str, Any]:
    """What the busiest shard tick of the burst takes on AWS: the dispatcher makes its requests one
    after the other, so its counted DynamoDB requests and SQS batches per tick × the latencies of
    :data:`DYNAMODB_SECONDS` and :data:`SQS_BATCH_SECONDS`."""
    use = tally.functions.get("dispatcher")
    if use is None or not creating:
        return {}
    dynamodb = sum(op.requests for name, op in use.operations.items() if name.startswith("dynamodb."))
    sqs = sum(op.requests for name, op in use.operations.items() if name.startswith("sqs."))
    share = max(t["runs_created"] for t in creating) / max(sum(t["runs_created"] for t in creating), 1)
    per_tick_dynamodb, per_tick_sqs = dynamodb * share, sqs * share
    low = per_tick_dynamodb * DYNAMODB_SECONDS[0] + per_tick_sqs * SQS_BATCH_SECONDS[0]
    high = per_tick_dynamodb * DYNAMODB_SECONDS[1] + per_tick_sqs * SQS_BATCH_SECONDS[1]
    return {
        "busiest_tick_dynamodb_requests": round(per_tick_dynamodb),
        "busiest_tick_sqs_requests": round(per_tick_sqs),
        "busiest_tick_seconds": [round(low, 1), round(high, 1)],
        "lookahead_seconds": resources.DEFAULT_LOOKAHEAD_SECONDS,
        "dispatcher_timeout_seconds": next(
            s.timeout_seconds for s in resources.FUNCTIONS if s.name == "dispatcher"
        ),
        "assumptions": "requests one after the other; DynamoDB 5-10 ms, SendMessageBatch 10-30 ms",
        "shards": shards,
    }


def burst_text(figures: dict[str, Any]) -> str:
    """The readable report of ``jobsched bench --burst``."""
    per_run = figures["per_run"]
    lines = [
        f"Burst: {figures['jobs']} jobs ({figures['schedule']}) due at {figures['due_at']}, "
        f"{figures['shards']} shards",
        f"  runs {figures['runs']}, succeeded {figures['succeeded']}, lost {figures['lost']}, "
        f"duplicates {figures['duplicates']}",
        f"  enqueued ahead {figures['enqueued_ahead']}, late {figures['enqueued_late']}; "
        f"ticks needed {figures['ticks_needed']} (in {figures['minutes_needed']} minute(s))",
        f"  per run: {per_run['wru']} WRU, {per_run['rru']} RRU, {per_run['sqs_requests']} SQS requests, "
        f"{per_run['dynamodb_requests']} DynamoDB requests",
    ]
    steady = figures.get("steady")
    if steady:
        sp = steady["per_run"]
        lines.append(
            f"  steady state ({steady['runs']} jobs due in a minute): {sp['wru']} WRU, {sp['rru']} RRU, "
            f"{sp['sqs_requests']} SQS requests, {sp['dynamodb_requests']} DynamoDB requests"
        )
        lines.append(f"  burst / steady: {figures['per_run_vs_steady']}")
    model = figures.get("aws_model")
    if model:
        lo, hi = model["busiest_tick_seconds"]
        lines.append(
            f"  AWS model: busiest shard tick {model['busiest_tick_dynamodb_requests']} DynamoDB + "
            f"{model['busiest_tick_sqs_requests']} SQS requests in sequence, {lo}-{hi} s "
            f"(look-ahead {model['lookahead_seconds']} s)"
        )
    return "\n".join(lines)
