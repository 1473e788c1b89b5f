"""The AWS estimate of the per-run cost: the pipeline's measured requests, Lambda duration modelled,
and the early-arrival wait simulated with the real dispatcher (issue 12 §5, decision 0032).

The pipeline benchmark (:mod:`jobsched.bench.pipeline`) measures requests exactly, but its Lambda
duration is moto's emulation, and its fake clock ticks exactly on the minute, so no message ever
surfaces early. On AWS a tick fires a fraction of a second into its minute. This module computes,
in USD per million runs:

* ``request_priced``: DynamoDB, SQS and Lambda request charges as the pipeline measured them;
* ``lambda_duration_calls``: each function's AWS calls per run (measured) × a stated latency per call
  (:class:`Latency`) ÷ the calls that run at once (:func:`call_duration`), × memory;
* ``early_arrival``: :func:`simulate_ticks` runs the real dispatcher
  (:func:`jobsched.compose.pipeline.dispatcher_from_settings`) against moto on a fake clock: per-minute
  cron jobs, every minute one tick per shard, each tick at an offset into the minute drawn from a
  seeded RNG; every AWS call moves the clock by its stated latency, and the tick's alignment sleep
  moves it too. Each ``SendMessageBatch`` entry is recorded with the clock at the call and the
  ``DelaySeconds`` the code chose; the message surfaces at call + delay, and a worker invocation
  (the records of one queue surfacing at the same instant, ten at a time, as an event source mapping
  with no batching window takes them) waits for its latest-due record: ``max(due - surfaced)``.
  That wait and the dispatcher's alignment sleep are priced as Lambda duration.

Both variants run: ``before`` with the alignment off (``send_align_ms`` 0: delays rounded down, the
code before decision 0032) and ``after`` with the deployment default. Everything is computed, from the
real code's choices; only the latencies and the prices are inputs.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from jobsched.aws.clients import Clients
from jobsched.aws.metering import Meter
from jobsched.aws.run_reads import READ_CONCURRENCY
from jobsched.bench.bindings import BENCH_TENANT
from jobsched.bench.container_cost import pool_estimate
from jobsched.bench.environment import REGION, bench_environment
from jobsched.bench.evidence import register_bench_handler
from jobsched.bench.pricing import MILLION, US_EAST_1, Prices
from jobsched.compose.pipeline import dispatcher_from_settings, job_service_from_settings
from jobsched.core.clock import FakeClock
from jobsched.core.inflight import PARTITIONS
from jobsched.core.models import from_iso
from jobsched.core.send_timing import early_seconds, late_seconds, surfaces_at
from jobsched.runtime import resources
from jobsched.runtime.settings import Settings

GOAL_USD_PER_MILLION = 2.60
#: A fixed, aware start of the simulated time (never the wall clock).
DEFAULT_START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCHEDULE = "* * * * *"
#: Records per worker invocation (the event source mappings' batch size).
BATCH_SIZE = 10


@dataclass(frozen=True)
class Latency:
    """Seconds one AWS call takes from a Lambda function in the same region (stated, with sources).

    DynamoDB: "single-digit millisecond" responses (the DynamoDB developer guide's introduction): 5 ms,
    as docs/scaling.md assumes. SQS: "averages around 20 ms" from a client in the same region (the SQS
    developer guide, "Increasing throughput using horizontal scaling and action batching").
    """

    dynamodb: float = 0.005
    sqs: float = 0.020


@dataclass(frozen=True)
class TickConfig:
    """What :func:`simulate_ticks` runs: ``jobs`` per-minute crons over ``shards``, ``minutes`` of
    ticks, offsets from ``seed``."""

    jobs: int = 100
    minutes: int = 10
    #: 0: every job created before the first tick (the pipeline benchmark's pattern: all of a shard's
    #: jobs are advanced by the same tick, one tick in a planning cycle sends); N: created in N groups,
    #: one a minute, so that N ticks of a cycle send (N = the cycle's minutes: every tick, the
    #: alignment's worst case per run)
    stagger_minutes: int = 0
    shards: int = resources.DEFAULT_SHARDS
    seed: int = 12
    latency: Latency = field(default_factory=Latency)
    payload_bytes: int = 1024
    start: datetime = DEFAULT_START


@dataclass(frozen=True)
class Sent:
    """One message a tick sent: its run's due instant, the clock at the call, the delay chosen."""

    queue: str
    due_at: datetime
    sent_at: datetime
    delay: int

    @property
    def surfaced(self) -> datetime:
        return surfaces_at(self.sent_at, self.delay)


def worker_waits(sent: list[Sent], receive_seconds: float) -> list[tuple[datetime, float]]:
    """(receive instant, wait) of each worker invocation, as an event source mapping with no batching
    window takes the messages: per queue, in the order they surface, one receive starting when a
    message surfaces returns it and those surfacing within ``receive_seconds`` (one SQS call) after
    it, at most :data:`BATCH_SIZE`; the invocation's records wait together (concurrent threads) for
    the latest-due of them: ``wait = max(0, max(due) - (first surfaced + receive_seconds))``."""
    by_queue: dict[str, list[Sent]] = defaultdict(list)
    for s in sent:
        by_queue[s.queue].append(s)
    out: list[tuple[datetime, float]] = []
    window = timedelta(seconds=receive_seconds)
    for members in by_queue.values():
        members.sort(key=lambda s: (s.surfaced, s.due_at))
        i = 0
        while i < len(members):
            received = members[i].surfaced + window
            batch = [members[i]]
            i += 1
            while i < len(members) and len(batch) < BATCH_SIZE and members[i].surfaced <= received:
                batch.append(members[i])
                i += 1
            latest = max(s.due_at for s in batch)
            out.append((received, max(0.0, (latest - received).total_seconds())))
    return out


def early_arrival(
    sent: list[Sent],
    align_seconds: float,
    ticks_sending: int,
    *,
    receive_seconds: float,
    worker_mb: int,
    dispatcher_mb: int,
    prices: Prices = US_EAST_1,
) -> dict[str, Any]:
    """The early-arrival figures of one simulated variant, per run and in USD per million runs."""
    runs = len(sent)
    if runs == 0:
        raise ValueError("no message was sent: nothing to estimate")
    waits = [wait for _, wait in worker_waits(sent, receive_seconds)]
    early = sorted(early_seconds(s.due_at, s.sent_at, s.delay) for s in sent)
    late = [late_seconds(s.due_at, s.sent_at, s.delay) for s in sent]
    wait_gb_s = sum(waits) * worker_mb / 1024 / runs
    align_gb_s = align_seconds * dispatcher_mb / 1024 / runs
    return {
        "runs": runs,
        "worker_invocations": len(waits),
        "invocations_waiting": sum(1 for w in waits if w > 0),
        "runs_early": sum(1 for e in early if e > 0),
        "early_p50_seconds": round(early[len(early) // 2], 4),
        "early_max_seconds": round(early[-1], 4),
        "late_max_seconds": round(max(late), 4),
        #: surfaced more than 100 ms (the deployed alignment margin) after their due instant
        "runs_late_over_100_ms": sum(1 for t in late if t > 0.1 + 1e-9),
        "worker_wait_seconds_per_invocation": round(sum(waits) / len(waits), 4),
        "worker_wait_gb_seconds_per_run": round(wait_gb_s, 8),
        "dispatcher_align_seconds_per_sending_tick": round(align_seconds / max(ticks_sending, 1), 4),
        "dispatcher_align_gb_seconds_per_run": round(align_gb_s, 8),
        "usd_worker_wait": round(wait_gb_s * prices.lambda_gb_second * MILLION, 4),
        "usd_dispatcher_align": round(align_gb_s * prices.lambda_gb_second * MILLION, 4),
        "usd_per_million_runs": round((wait_gb_s + align_gb_s) * prices.lambda_gb_second * MILLION, 4),
    }


#: The calls a deployed tick makes ``dispatch_concurrency`` at a time (its runs' puts, its job
#: advances, its aligned send rounds; the lease's two updates are among the updates, a small overcount
#: of the overlap). Everything else a tick calls (queries, reads, the feed) goes one call at a time.
PARALLEL_CALLS = frozenset({"put_item", "update_item", "send_message_batch"})
_PARALLEL_OPERATIONS = frozenset({"dynamodb.PutItem", "dynamodb.UpdateItem", "sqs.SendMessageBatch"})


def call_duration(
    breakdown: dict[str, Any],
    latency: Latency,
    *,
    worker_concurrency: int,
    dispatch_concurrency: int = resources.DEFAULT_DISPATCH_CONCURRENCY,
    prices: Prices = US_EAST_1,
) -> dict[str, Any]:
    """Lambda duration of the functions' AWS calls on AWS, per run and in USD per million runs.

    ``breakdown`` is the pipeline's (per successful run: ``invocations``, ``memory_mb``, ``operations``
    with ``requests``). Per invocation: DynamoDB calls × ``latency.dynamodb`` + SQS calls ×
    ``latency.sqs``, divided by the calls that run at once: the worker's records run concurrently (as
    many as it has per invocation, at most ``worker_concurrency``); the dispatcher's puts, updates and
    sends run ``dispatch_concurrency`` at a time and its other calls one after the other; the
    sweeper's Queries of its runs ``READ_CONCURRENCY`` at a time (after its ledger partitions' Queries)
    and its other calls one after the other.
    """

    def seconds(ops: dict[str, Any], invocations: float, share: dict[str, float]) -> float:
        """Seconds of calls per invocation, each operation's calls divided by ``share[op]`` (or 1)."""
        total = 0.0
        for op, use in ops.items():
            per_call = latency.dynamodb if op.startswith("dynamodb.") else latency.sqs
            total += use["requests"] / invocations * per_call / share.get(op, 1.0)
        return total

    functions: dict[str, Any] = {}
    total_gb_s = 0.0
    for name, entry in breakdown.items():
        invocations = entry.get("invocations")
        if not invocations:
            continue  # the event source mapping: requests, no Lambda duration
        ops = entry["operations"]
        if name == "worker":
            at_once = min(max(1.0, 1 / invocations), float(worker_concurrency))
            spent = seconds(ops, invocations, dict.fromkeys(ops, at_once))
        elif name == "dispatcher":
            spent = seconds(
                ops, invocations, dict.fromkeys(_PARALLEL_OPERATIONS, float(dispatch_concurrency))
            )
        elif name == "sweeper":
            spent = seconds(ops, invocations, _sweeper_shares(ops, invocations))
        else:
            spent = seconds(ops, invocations, {})
        gb_s = invocations * spent * entry["memory_mb"] / 1024
        total_gb_s += gb_s
        functions[name] = {
            "dynamodb_calls_per_invocation": round(
                sum(u["requests"] for op, u in ops.items() if op.startswith("dynamodb.")) / invocations, 3
            ),
            "sqs_calls_per_invocation": round(
                sum(u["requests"] for op, u in ops.items() if op.startswith("sqs.")) / invocations, 3
            ),
            "ms_per_invocation": round(spent * 1000, 2),
            "gb_seconds_per_run": round(gb_s, 8),
        }
    return {
        "functions": functions,
        "gb_seconds_per_run": round(total_gb_s, 8),
        "usd_per_million_runs": round(total_gb_s * prices.lambda_gb_second * MILLION, 4),
        "calls_at_once": {
            "worker": f"its records (up to {worker_concurrency})",
            "dispatcher": f"PutItem, UpdateItem, SendMessageBatch {dispatch_concurrency} at a time, "
            "the rest 1",
            "sweeper": f"its ledger Queries 1, its runs' Queries {READ_CONCURRENCY} at a time, the rest 1",
            "others": 1,
        },
    }


def _sweeper_shares(ops: dict[str, Any], invocations: float) -> dict[str, float]:
    """The sweeper's Queries: one per ledger partition, one after the other, then its runs' Queries
    (one per job with runs to read) ``READ_CONCURRENCY`` at a time: the share that divides them all."""
    queries = ops.get("dynamodb.Query", {}).get("requests", 0.0) / invocations
    if queries <= PARTITIONS:
        return {}
    return {"dynamodb.Query": queries / (PARTITIONS + (queries - PARTITIONS) / READ_CONCURRENCY)}


def estimate(
    pipeline: dict[str, Any],
    variants: dict[str, dict[str, Any]],
    latency: Latency,
    *,
    worker_concurrency: int = resources.DEFAULT_WORKER_CONCURRENCY,
    scaled: dict[str, dict[str, dict[str, Any]]] | None = None,
    setup: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``aws_estimate`` object: ``pipeline`` is the pipeline benchmark's figures, ``variants``
    the early-arrival figures of ``before`` and ``after`` (:func:`early_arrival`), ``scaled`` the
    same at other scales (e.g. ``{"10x": {...}}``)."""
    usd = pipeline["usd_breakdown_per_million_runs"]
    requests = usd["dynamodb_writes"] + usd["dynamodb_reads"] + usd["sqs"] + usd["lambda_requests"]
    calls = call_duration(pipeline["breakdown"], latency, worker_concurrency=worker_concurrency)
    totals = {
        name: round(requests + calls["usd_per_million_runs"] + figures["usd_per_million_runs"], 4)
        for name, figures in variants.items()
    }
    after = totals.get("after")
    wait = float((variants.get("after") or {}).get("worker_wait_gb_seconds_per_run", 0.0))
    return {
        "usd_per_million_runs": totals,
        "request_priced": round(requests, 4),
        "lambda_duration_calls": calls,
        "early_arrival": variants,
        "container_pool": pool_estimate(pipeline, calls, wait),
        **({"scaled": scaled} if scaled else {}),
        "latency_ms": {"dynamodb": latency.dynamodb * 1000, "sqs": latency.sqs * 1000},
        "goal_usd_per_million_runs": GOAL_USD_PER_MILLION,
        "goal_met": bool(
            after is not None
            and after <= GOAL_USD_PER_MILLION
            and not pipeline["duplicates"]
            and not pipeline["lost"]
        ),
        **({"setup": setup} if setup else {}),
    }


# --- the simulation ---------------------------------------------------------------------------------


class _Timed:
    """A boto3 client whose every call moves ``clock`` by ``seconds`` (its latency on AWS; divided by
    ``parallel`` for :data:`PARALLEL_CALLS`: the simulation makes them one at a time, so that it is
    deterministic, where a deployed tick makes ``dispatch_concurrency`` at once) after it returns;
    ``SendMessageBatch`` calls are handed to ``on_send`` first, with the clock at the call."""

    def __init__(
        self,
        client: Any,
        clock: FakeClock,
        seconds: float,
        on_send: Callable[[datetime, dict], None],
        parallel: int = 1,
    ):
        self._client, self._clock, self._seconds, self._on_send = client, clock, seconds, on_send
        self._parallel = max(1, parallel)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name.startswith("_") or name in ("get_paginator", "can_paginate") or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "send_message_batch":
                self._on_send(self._clock.now(), kwargs)
            try:
                return attr(*args, **kwargs)
            finally:
                share = self._parallel if name in PARALLEL_CALLS else 1
                self._clock.advance(self._seconds / share)

        return call


class _TimedClients(Clients):
    def __init__(
        self, clock: FakeClock, latency: Latency, on_send: Callable[[datetime, dict], None], parallel: int
    ):
        super().__init__(region_name=REGION)
        self._clock, self._latency, self._on_send, self._parallel = clock, latency, on_send, parallel

    @cached_property
    def dynamodb(self) -> Any:
        return _Timed(
            self.client("dynamodb"), self._clock, self._latency.dynamodb, self._on_send, self._parallel
        )

    @cached_property
    def sqs(self) -> Any:
        return _Timed(self.client("sqs"), self._clock, self._latency.sqs, self._on_send, self._parallel)


@dataclass
class TickRun:
    """What :func:`simulate_ticks` recorded for one variant."""

    sent: list[Sent]
    align_seconds: float
    ticks: int
    ticks_sending: int


def simulate_ticks(config: TickConfig, *, send_align_ms: int) -> TickRun:
    """Ticks of the real dispatcher at seeded sub-second offsets (see the module docstring)."""
    rng = random.Random(config.seed)
    clock = FakeClock(config.start - timedelta(seconds=30))
    sent: list[Sent] = []
    recording = False

    def on_send(at: datetime, kwargs: dict) -> None:
        if recording:
            queue = str(kwargs["QueueUrl"]).rsplit("/", 1)[-1]
            for entry in kwargs["Entries"]:
                due = from_iso(json.loads(entry["MessageBody"])["due_at"])
                sent.append(Sent(queue=queue, due_at=due, sent_at=at, delay=int(entry["DelaySeconds"])))

    slept = [0.0]

    def sleep(seconds: float) -> None:
        slept[0] += seconds
        clock.advance(seconds)

    ticks = ticks_sending = 0
    groups = max(1, config.stagger_minutes)
    with bench_environment(config.shards, clock):
        deployed = Settings.from_env()
        settings = replace(deployed, send_align_ms=send_align_ms, dispatch_concurrency=1)
        service = job_service_from_settings(settings, Clients(region_name=REGION), meter=Meter())
        ids = iter(f"bench-{i:05d}" for i in range(config.jobs))
        service.id_factory = lambda: next(ids)
        spec = {
            "name": "estimate",
            "schedule": SCHEDULE,
            "target": {"handler": register_bench_handler("summary")},
            "payload": {"data": "x" * max(0, config.payload_bytes - 11)},
        }
        dispatcher = dispatcher_from_settings(
            settings,
            _TimedClients(clock, config.latency, on_send, deployed.dispatch_concurrency),
            owner="estimate",
            clock=clock,
            sleep=sleep,
        )
        for minute in range(config.minutes):
            if minute < groups:  # this minute's group of jobs, created half a minute before its tick
                recording = False
                clock.set(config.start + timedelta(minutes=minute, seconds=-30))
                for _ in range(config.jobs * (minute + 1) // groups - config.jobs * minute // groups):
                    service.create(BENCH_TENANT, spec, clock.now())
                recording = True
            for shard in range(config.shards):
                clock.set(config.start + timedelta(minutes=minute, seconds=rng.random()))
                before = len(sent)
                summary = dispatcher.dispatch_shard(shard, clock.now(), config.shards)
                ticks += 1
                ticks_sending += len(sent) > before
                del summary
    return TickRun(sent=sent, align_seconds=slept[0], ticks=ticks, ticks_sending=ticks_sending)


def simulate_variants(config: TickConfig) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``before`` (alignment off) and ``after`` (the deployment default) over the same seeded ticks:
    their early-arrival figures, and a description of the simulation."""
    memory = {spec.name: spec.memory_mb for spec in resources.FUNCTIONS}
    variants: dict[str, dict[str, Any]] = {}
    ticks = 0
    for name, margin in (("before", 0), ("after", resources.DEFAULT_SEND_ALIGN_MS)):
        run = simulate_ticks(config, send_align_ms=margin)
        ticks = run.ticks
        variants[name] = early_arrival(
            run.sent,
            run.align_seconds,
            run.ticks_sending,
            receive_seconds=config.latency.sqs,
            worker_mb=memory["worker"],
            dispatcher_mb=memory["dispatcher"],
        ) | {"send_align_ms": margin, "ticks_sending": run.ticks_sending}
    setup = {
        "jobs": config.jobs,
        "schedule": SCHEDULE,
        "minutes": config.minutes,
        "stagger_minutes": config.stagger_minutes,
        "shards": config.shards,
        "ticks": ticks,
        "seed": config.seed,
        "tick_offsets": "uniform in [0, 1) s into the minute, one draw per shard and minute",
        "calls_at_once": "the tick's puts, advances and send batches move the clock by latency / "
        "dispatch_concurrency (deployed); its other calls by the whole latency",
    }
    return variants, setup


def run_estimate(
    pipeline: dict[str, Any], config: TickConfig | None = None, *, scale: int = 10
) -> dict[str, Any]:
    """The ``aws_estimate`` object for the pipeline figures ``pipeline``: the simulation at the
    headline's jobs, and at ``scale`` times as many (0: not run)."""
    # The jobs' first dispatch (at their creation) queues the pipeline's warm-up minutes of runs; the
    # ticks first send for a job at the advance after it, a look-ahead (a minute) before they run
    # out: the simulation runs one minute past that, so every job's advance is in it.
    warm_up = int(pipeline["setup"].get("warm_up_minutes", 5))
    config = config or TickConfig(
        jobs=pipeline["setup"]["jobs"], shards=pipeline["setup"]["shards"], minutes=warm_up + 1
    )
    variants, setup = simulate_variants(config)
    scaled: dict[str, dict[str, Any]] = {}
    # as many groups as minutes in a planning cycle: every tick of every shard sends
    stagger = int(pipeline["setup"].get("planning_cycle_minutes", 5))
    staggered, staggered_setup = simulate_variants(
        replace(config, stagger_minutes=stagger, minutes=config.minutes + stagger)
    )
    scaled["staggered"] = staggered | {"setup": staggered_setup}
    if scale and scale > 1:
        # the same minutes hold the tick that advances every job: enough, and 10x the moto work of
        # the headline already
        bigger = replace(config, jobs=config.jobs * scale)
        scaled_variants, scaled_setup = simulate_variants(bigger)
        scaled[f"{scale}x"] = scaled_variants | {"setup": scaled_setup}
    figures = estimate(pipeline, variants, config.latency, scaled=scaled, setup=setup)
    if scale:  # the whole benchmark (the tests' scale 0 leave it out): the forecast's cost (decision 0054)
        from jobsched.bench.forecast_cost import run_forecast_cost

        figures["forecast"] = run_forecast_cost(
            jobs=config.jobs, shards=config.shards, latency=config.latency
        )
    return figures


def estimate_text(figures: dict[str, Any]) -> str:
    """The estimate as a few lines of the readable report."""
    totals = figures["usd_per_million_runs"]
    early = figures["early_arrival"]
    goal = "met" if figures["goal_met"] else "NOT met"
    calls = figures["lambda_duration_calls"]["usd_per_million_runs"]
    latency = figures["latency_ms"]
    lines = [
        f"  AWS estimate, USD per million runs: before {totals['before']:.3f}, "
        f"after {totals['after']:.3f}  (goal <= {figures['goal_usd_per_million_runs']:.2f}: {goal})",
        f"    request-priced (measured) {figures['request_priced']:.3f}; Lambda duration of the calls "
        f"{calls:.3f} (DynamoDB {latency['dynamodb']:g} ms, SQS {latency['sqs']:g} ms a call)",
    ]
    pool = figures.get("container_pool")
    if pool:
        lines.append(
            f"    on the container pool {pool['usd_per_million_runs']:.3f} (Fargate "
            f"{pool['fargate_usd_per_million_runs']:.3f} for "
            f"{pool['fargate_busy_seconds_per_run'] * 1000:.1f} ms "
            f"of a busy task a run); a burst from 0 adds {pool['burst_overhead_usd_per_task']:.4f} a task; "
            f"idle {pool['idle_usd_per_month']:.2f} a month"
        )
    for name in ("before", "after"):
        e = early[name]
        lines.append(
            f"    early arrival {name:<6} {e['usd_per_million_runs']:.3f} "
            f"(worker wait {e['usd_worker_wait']:.3f}, dispatcher align {e['usd_dispatcher_align']:.3f}): "
            f"{e['runs_early']} of {e['runs']} runs early, max {e['early_max_seconds']:g} s early, "
            f"max {e['late_max_seconds']:g} s late"
        )
    if figures.get("forecast"):
        from jobsched.bench.forecast_cost import forecast_cost_text

        lines.append(forecast_cost_text(figures["forecast"]))
    for scale, variants in (figures.get("scaled") or {}).items():
        before, after = variants["before"], variants["after"]
        lines.append(
            f"    {scale}: early arrival before {before['usd_per_million_runs']:.3f} "
            f"(max {before['late_max_seconds']:g} s late), after {after['usd_per_million_runs']:.3f} "
            f"(dispatcher align {after['usd_dispatcher_align']:.3f}, "
            f"max {after['late_max_seconds']:g} s late)"
        )
    return "\n".join(lines)
