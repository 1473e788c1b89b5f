"""The scaling model (``jobsched bench --scaling``; docs/scaling.md): where the deployed pipeline stops
keeping up as the run rate grows, from *measured* request counts times AWS's *published* limits.

1. The run pipeline benchmark (:mod:`jobsched.bench.pipeline`, moto, fake clock, the real handlers)
   measures, per successful run, the calls each function makes and the write and read units each
   table takes. Those do not depend on the machine.
2. :func:`model` multiplies them by a run rate and compares each stage with the AWS limit that bounds
   it (:class:`Limits`: DynamoDB's per-partition and per-table throughput, Lambda's concurrency and
   the SQS event source mapping's scale-up, SQS's in-flight messages). Two quantities are assumptions,
   not measurements, and are parameters: the latency of one DynamoDB or SQS call from Lambda
   (``call_ms``, 5 ms: DynamoDB's "single-digit milliseconds") and a run's handler time
   (``run_seconds``).

For each rate the model says, stage by stage, what is needed (shards, concurrent invocations,
write units per second on a table or on one key) against what the limit allows, whether the
deployment's defaults suffice, and which setting (or AWS quota) to raise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from jobsched.core.ids import DUE_PARTITIONS
from jobsched.runtime import resources

#: The rates the report covers, runs per second.
RATES = (1_000, 10_000, 100_000)
#: A tick's share of its minute the model lets it work (the dispatcher's timeout is 60 s).
TICK_BUSY_SHARE = 50 / 60
#: Runs per worker invocation (the event source mapping's batch size; records run concurrently).
BATCH_SIZE = 10


@dataclass(frozen=True)
class Limits:
    """AWS's published limits (us-east-1, 2026; adjustable ones marked in docs/scaling.md)."""

    partition_wcu: int = 1_000  # DynamoDB: write units per second one partition (one key) serves
    partition_rcu: int = 3_000
    table_wru: int = 40_000  # DynamoDB on-demand: default per-table write request units per second
    table_rru: int = 40_000
    account_concurrency: int = 1_000  # Lambda: default concurrent executions per account and region
    mapping_concurrency: int = 1_000  # SQS event source mapping: MaximumConcurrency at most
    mapping_start: int = 5  # the mapping starts with 5 concurrent batches ...
    mapping_step_per_minute: int = 300  # ... and adds up to 300 a minute
    sqs_in_flight: int = 120_000  # SQS standard queue: messages received and not yet deleted
    max_shards: int = DUE_PARTITIONS  # jobsched: a shard owns at least one of the 32 due partitions


@dataclass(frozen=True)
class Assumptions:
    call_ms: float = 5.0  # one DynamoDB/SQS call from Lambda, in the region
    run_seconds: float = 1.0  # a run's handler time
    shards: int = resources.DEFAULT_SHARDS
    dispatch_concurrency: int = resources.DEFAULT_DISPATCH_CONCURRENCY
    mapping_concurrency: int = 20  # the `default` queue's MaximumConcurrency (infra/config.py)
    #: Attempts beyond the first, per run: each retry takes an invocation's slot again (issue 31 §3's
    #: headroom; 10 % is a deployment where one run in ten fails once, e.g. a flaky downstream).
    retry_share: float = 0.10
    #: The worker function's configured memory (MB) its measured peak is checked against.
    worker_memory_mb: int = resources.WORKER_MEMORY_MB
    #: The share of the configured memory the worker's own peak may take: the rest is the handlers'
    #: (ten records run at once, each with its payload and output).
    memory_share: float = 0.5


@dataclass
class Measured:
    """Per successful run, from the pipeline benchmark (per-minute cron jobs, 1 KB payload)."""

    dispatcher_calls: float  # the dispatcher's calls per run that grow with runs (its per-tick Query aside)
    dispatcher_job_calls: float  # of those, the ones made per job (the runs' puts, the advance): in parallel
    worker_calls: float  # the worker's calls per run (claim, finish, usage, reads)
    advances: float  # job advances per run (one conditional update of the job and its index entries)
    feed_wru: float  # the tenant run feed's write units per run (one key per tenant)
    usage_writes: float  # usage item writes per run (one key per tenant and day)
    #: the worker's peak resident memory (MB) measured in a fresh process (0: not measured)
    worker_peak_mb: float = 0.0
    table_wru: dict[str, float] = field(default_factory=dict)  # per table
    table_rru: dict[str, float] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_pipeline(cls, figures: dict[str, Any]) -> Measured:
        """From ``jobsched bench --json``'s pipeline figures (``breakdown``, ``by_table``, ``setup``)."""
        breakdown = figures["breakdown"]
        dispatcher = breakdown["dispatcher"]["operations"]
        worker = breakdown["worker"]["operations"]
        setup = figures["setup"]
        runs_per_minute = setup["jobs"]  # per-minute crons
        ticks_per_run = setup["shards"] / runs_per_minute
        # Per tick a shard acquires and releases its lease (two UpdateItems) and queries its partitions;
        # the rest of the dispatcher's calls are per run or per page of runs.
        updates = dispatcher.get("dynamodb.UpdateItem", {}).get("requests", 0.0)
        advances = max(0.0, updates - 2 * ticks_per_run)
        calls = sum(op["requests"] for name, op in dispatcher.items() if name != "dynamodb.Query")
        calls -= 2 * ticks_per_run
        job_calls = dispatcher.get("dynamodb.PutItem", {}).get("requests", 0.0) + advances
        by_table = figures.get("by_table", {})
        return cls(
            dispatcher_calls=calls,
            dispatcher_job_calls=job_calls,
            worker_calls=sum(op["requests"] for op in worker.values()),
            advances=advances,
            feed_wru=dispatcher.get("dynamodb.BatchWriteItem", {}).get("wru", 0.0),
            usage_writes=1.0 / BATCH_SIZE,
            table_wru={name: use["wru"] for name, use in by_table.items()},
            table_rru={name: use["rru"] for name, use in by_table.items()},
            source={
                "command": "jobsched bench --scaling (pipeline: --runs "
                f"{figures['runs']} --jobs {setup['jobs']} --shards {setup['shards']})",
                "runs": figures["runs"],
                "succeeded": figures["succeeded"],
                "wru_per_run": figures["wru"],
                "rru_per_run": figures["rru"],
            },
        )


@dataclass
class Stage:
    name: str
    needed: float
    allowed: float
    unit: str
    setting: str
    default_ok: bool

    @property
    def ok(self) -> bool:
        return self.needed <= self.allowed

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "ok": self.ok,
            "needed": round(self.needed, 2),
            "allowed": round(self.allowed, 2),
        }


def dispatcher_runs_per_second_per_shard(measured: Measured, assume: Assumptions) -> float:
    """Runs a shard's tick dispatches per second: the calls made per job (the runs' puts, the advance)
    run ``dispatch_concurrency`` at once, the page's own calls (reads, feed, sends) one after another."""
    serial = measured.dispatcher_calls - measured.dispatcher_job_calls
    calls = serial + measured.dispatcher_job_calls / assume.dispatch_concurrency
    return TICK_BUSY_SHARE / (calls * assume.call_ms / 1000)


def model(rate: float, measured: Measured, assume: Assumptions, limits: Limits | None = None) -> list[Stage]:
    """Every stage at ``rate`` runs per second (spread over many tenants unless a stage says
    'one tenant'), in pipeline order."""
    limits = limits or Limits()
    per_shard = dispatcher_runs_per_second_per_shard(measured, assume)
    shards = math.ceil(rate / per_shard)
    invocation_seconds = assume.run_seconds + measured.worker_calls * assume.call_ms / 1000
    concurrency = rate * invocation_seconds / BATCH_SIZE
    stages = [
        Stage(
            "dispatcher: shards needed",
            shards,
            limits.max_shards,
            "shards",
            f"-c shards= (default {resources.DEFAULT_SHARDS}, at most {limits.max_shards}) and "
            f"-c dispatch_concurrency= (default {resources.DEFAULT_DISPATCH_CONCURRENCY})",
            shards <= assume.shards,
        ),
        Stage(
            "worker: concurrent invocations (one queue)",
            concurrency,
            min(limits.mapping_concurrency, limits.account_concurrency),
            "invocations",
            "-c max_concurrency= per queue (default 20 on default, at most 1000) and the account's "
            "Lambda concurrency quota (1000 by default)",
            concurrency <= assume.mapping_concurrency,
        ),
        Stage(
            "worker: concurrent invocations with retry headroom (one queue)",
            concurrency * (1 + assume.retry_share),
            min(limits.mapping_concurrency, limits.account_concurrency),
            "invocations",
            "-c max_concurrency= per queue; the capacity service's cap (-c capacity_max_concurrency=, "
            "docs/deploy.md) raises it on age when retries pile up",
            concurrency * (1 + assume.retry_share) <= assume.mapping_concurrency,
        ),
        Stage(
            "SQS: messages in flight (one queue)",
            rate * invocation_seconds,
            limits.sqs_in_flight,
            "messages",
            "a fixed SQS limit: spread the load over priorities (one queue each)",
            True,
        ),
    ]
    for table in sorted(measured.table_wru):
        wru = rate * measured.table_wru[table]
        stages.append(
            Stage(
                f"DynamoDB {table} table: write units per second",
                wru,
                limits.table_wru,
                "WRU/s",
                "the table's on-demand throughput quota (Service Quotas, adjustable)",
                wru <= limits.table_wru,
            )
        )
    if measured.worker_peak_mb:
        allowed = assume.worker_memory_mb * assume.memory_share
        stages.append(
            Stage(
                "worker: measured peak memory against its configured size",
                measured.worker_peak_mb,
                allowed,
                "MB",
                f"the worker's memory_mb in runtime/resources.FUNCTIONS ({assume.worker_memory_mb} MB; "
                f"{assume.memory_share:.0%} of it is left to the handlers)",
                measured.worker_peak_mb <= allowed,
            )
        )
    index_wru = rate * measured.advances * 2 / DUE_PARTITIONS
    stages.append(
        Stage(
            "DynamoDB due index: write units per second on one due partition",
            index_wru,
            limits.partition_wcu,
            "WRU/s",
            "none: 32 partitions are fixed (decision 0016); fewer advances per run (a longer horizon)",
            index_wru <= limits.partition_wcu,
        )
    )
    tenant_stages = (
        ("one tenant: Jobs table key (its job advances)", rate * measured.advances),
        ("one tenant: run feed key", rate * measured.feed_wru),
        ("one tenant: usage key (one write per invocation)", rate * measured.usage_writes),
    )
    for name, wru in tenant_stages:
        stages.append(
            Stage(
                name,
                wru,
                limits.partition_wcu,
                "WRU/s",
                "spread the load over tenants (DynamoDB's split for heat may lift a hot key later)",
                wru <= limits.partition_wcu,
            )
        )
    return stages


def scale_up_minutes(concurrency: float, limits: Limits | None = None) -> float:
    """Minutes the SQS event source mapping takes to reach ``concurrency`` from idle."""
    limits = limits or Limits()
    return max(0.0, (min(concurrency, limits.mapping_concurrency) - limits.mapping_start)) / (
        limits.mapping_step_per_minute
    )


def report(measured: Measured, assume: Assumptions, rates: tuple[int, ...] = RATES) -> dict[str, Any]:
    """The JSON of ``jobsched bench --scaling`` (key ``scaling``)."""
    out: dict[str, Any] = {
        "measured": asdict(measured),
        "assumptions": asdict(assume),
        "limits": asdict(Limits()),
        "dispatcher_runs_per_second_per_shard": round(
            dispatcher_runs_per_second_per_shard(measured, assume), 1
        ),
        "rates": {},
    }
    for rate in rates:
        stages = model(rate, measured, assume)
        broken = [s for s in stages if not s.ok]
        concurrency = stages[1].needed
        out["rates"][str(rate)] = {
            "stages": [s.to_dict() for s in stages],
            "first_limit": broken[0].name if broken else None,
            "defaults_suffice": all(s.default_ok for s in stages),
            "scale_up_minutes": round(scale_up_minutes(concurrency), 1),
        }
    return out


def run_scaling(runs: int = 500, jobs: int = 100, assume: Assumptions | None = None) -> dict[str, Any]:
    """Measure the per-run figures with the pipeline benchmark, then apply the model."""
    from jobsched.bench.pipeline import PipelineConfig, run_pipeline

    figures = run_pipeline(PipelineConfig(runs=runs, jobs=jobs, echo_variant=False)).to_dict()
    if figures["lost"] or figures["duplicates"] or not figures["succeeded"]:
        raise RuntimeError(
            f"the pipeline lost or duplicated runs: {figures['lost']}, {figures['duplicates']}"
        )
    measured = Measured.from_pipeline(figures)
    measured.worker_peak_mb = measure_worker_peak_mb()
    return report(measured, assume or Assumptions())


#: A fresh interpreter: the worker's entry module, then a batch of ten runs handled on the shipped
#: in-memory fakes (the worker's real code path, no emulator in the process), then its peak RSS.
# The peak of this process's own memory: Linux's VmHWM, kept per address space, so an exec starts it
# afresh. Not ru_maxrss: Linux carries it across fork and exec, so a child of a big process (a pytest
# worker at 600 MB) reports its parent's peak (measured: 622.4 MB against 40.7 MB from a shell).
_PEAK_SCRIPT = """
import resource
from pathlib import Path
from jobsched.bench.scaling import handle_a_batch_in_memory
handle_a_batch_in_memory()
status = Path("/proc/self/status")
hwm = [l for l in status.read_text().splitlines() if l.startswith("VmHWM:")] if status.exists() else []
print(int(hwm[0].split()[1]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def measure_worker_peak_mb() -> float:
    """The worker's peak resident memory in MB: a fresh process that imports ``functions.worker`` and
    handles one batch of ten runs (:func:`handle_a_batch_in_memory`)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT], capture_output=True, text=True, check=True)
    return round(float(out.stdout.strip().splitlines()[-1]), 1)


def handle_a_batch_in_memory(runs: int = BATCH_SIZE) -> int:
    """Import the worker's entry module, then create ``runs`` per-minute echo jobs, dispatch them and
    handle their first runs with the worker's own wiring (:func:`worker_from_settings`) on the shipped
    in-memory fakes; returns the runs that succeeded (all of them, or the measurement is void)."""
    import json
    from datetime import UTC, datetime

    import functions.worker  # noqa: F401  (what a cold start imports)
    from jobsched.compose.pipeline import (
        dispatcher_from_settings,
        job_service_from_settings,
        worker_from_settings,
    )
    from jobsched.core.clock import FakeClock
    from jobsched.services.deliveries import Delivery
    from jobsched.targets import demo  # noqa: F401  (registers demo.echo)
    from jobsched.testing import in_memory_aws

    due = datetime(2026, 3, 2, 12, 1, tzinfo=UTC)
    clock = FakeClock(datetime(2026, 3, 2, 12, 0, 30, tzinfo=UTC))
    fakes = in_memory_aws(clock=clock)
    clients: Any = fakes.clients  # the fakes stand in for boto3's clients
    jobs = job_service_from_settings(fakes.settings, clients)
    for i in range(runs):
        spec = {"name": f"m{i}", "schedule": "* * * * *", "target": {"handler": "demo.echo"}}
        jobs.create("peak", spec, clock.now())
    dispatcher = dispatcher_from_settings(fakes.settings, clients, owner="peak", clock=clock)
    for shard in range(fakes.settings.shards):
        dispatcher.dispatch_shard(shard, clock.now())
    clock.set(due)
    worker = worker_from_settings(fakes.settings, clients, clock, "peak")
    done = 0
    for message in fakes.clients.sqs.peek(fakes.settings.queue_url("default")):
        if json.loads(message["body"])["due_at"].startswith("2026-03-02T12:01:00"):
            outcome = worker.handle(Delivery.of(message["body"]), clock.now())
            done += outcome.status == "succeeded"
    if done != runs:
        raise RuntimeError(f"{done} of {runs} runs succeeded: the memory measurement is void")
    return done


def scaling_text(figures: dict[str, Any]) -> str:
    measured = figures["measured"]
    assume = figures["assumptions"]
    lines = [
        "scaling model: measured request counts x AWS limits (docs/scaling.md)",
        f"  measured per run: dispatcher {measured['dispatcher_calls']:.3f} calls, worker "
        f"{measured['worker_calls']:.3f} calls, {measured['advances']:.3f} job advances; "
        + ", ".join(f"{t} {w:.3f} WRU" for t, w in sorted(measured["table_wru"].items())),
        f"  assumed: {assume['call_ms']} ms per call, {assume['run_seconds']} s per run; "
        f"dispatcher: {figures['dispatcher_runs_per_second_per_shard']} runs/s per shard",
    ]
    for rate, entry in figures["rates"].items():
        first = entry["first_limit"] or "nothing"
        lines.append(
            f"  {int(rate):>7,} runs/s: first limit: {first}; defaults suffice: "
            f"{'yes' if entry['defaults_suffice'] else 'no'}; "
            f"scale-up from idle {entry['scale_up_minutes']} min"
        )
        for stage in entry["stages"]:
            mark = "ok " if stage["ok"] else "OVER"
            lines.append(
                f"      {mark} {stage['name']}: {stage['needed']:,} of {stage['allowed']:,} {stage['unit']}"
                + ("" if stage["default_ok"] else f"  -> raise: {stage['setting']}")
            )
    return "\n".join(lines)
