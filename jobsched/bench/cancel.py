"""The cancel benchmark: how soon a running run's cancellation is seen, and what the watching costs.

``python -m jobsched.bench.cancel [--runs N] [--cost-seconds S] [--json]`` measures two things.

**Latency, end to end in the embedded mode** (:func:`run_latency`): it starts the embedded mode
in-process (:class:`jobsched.local.embedded.EmbeddedMode`, exactly what ``jobsched dev`` runs), and
``runs`` times, one after the other: triggers a job whose handler (``bench.cancel_probe``, registered
here, in the same process as the worker) waits on ``ctx.cancel_event``; once the handler has started
it waits a random 0.5-2.5 s (so the cancel falls at any phase of the watch's period), then calls
``POST /runs/{id}/cancel`` and polls ``GET /runs/{id}`` every 50 ms. Per run it takes
``handler_seen`` = when the handler's wait returned - when the cancel request was sent (read from
the handler's own record, monotonic clock) and ``api_cancelled`` = when a ``GET`` first showed
``cancelled`` - the same instant. Percentiles are nearest-rank.

**Cost per minute of running time, metered** (:func:`run_cost`): in-process moto with every
resource provisioned (the cost benchmark's environment), the worker built by
:func:`jobsched.compose.pipeline.worker_from_settings` with a :class:`Meter`, runs one ``demo.sleep``
of ``cost_seconds`` real seconds with the deployed lease (60 s: a heartbeat every 20 s) and cancel
poll (1 s), and counts every DynamoDB request and unit; the figures are scaled to one minute and
priced at us-east-1 list prices (:mod:`jobsched.bench.pricing`). The message has no receipt handle
here, so the heartbeat's ``ChangeMessageVisibility`` (one SQS request per beat on AWS) is not
sent; it is added by count in the report (``heartbeat_sqs_requests_per_minute``).

Both are wall-clock measurements of a live system (it is the point); nothing in them is asserted on in
tests except their shape.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobsched.bench.pricing import MILLION, US_EAST_1
from jobsched.client import ApiClient
from jobsched.services.deliveries import Delivery
from jobsched.targets.context import JobContext
from jobsched.targets.registry import is_registered, job

PROBE_HANDLER = "bench.cancel_probe"
TENANT, TOKEN = "bench", "bench-cancel-token"  # only ever valid inside the benchmark's embedded mode
GOAL_HANDLER_P95_SECONDS = 2.0
GOAL_API_SECONDS = 5.0


class _Probes:
    """What the probe handler saw, per run id: monotonic instants of its start and of the cancel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started: dict[str, float] = {}
        self.seen: dict[str, float] = {}

    def start(self, run_id: str) -> None:
        with self._lock:
            self.started[run_id] = time.monotonic()

    def saw(self, run_id: str) -> None:
        with self._lock:
            self.seen[run_id] = time.monotonic()


PROBES = _Probes()


def register_probe() -> None:
    """Register ``bench.cancel_probe`` (once per process)."""
    if is_registered(PROBE_HANDLER):
        return

    @job(PROBE_HANDLER)
    def cancel_probe(payload: dict, ctx: JobContext) -> dict:
        """Wait up to ``payload.seconds`` (60) for the cancellation; record when it was seen."""
        PROBES.start(ctx.run_id)
        if ctx.cancel_event.wait(float(payload.get("seconds", 60))):
            PROBES.saw(ctx.run_id)
        return {"cancelled": ctx.cancelled}


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(pct / 100 * len(ordered))) - 1]


def _summary(values: list[float]) -> dict[str, float | None]:
    def r(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    return {
        "p50": r(percentile(values, 50)),
        "p95": r(percentile(values, 95)),
        "max": r(max(values) if values else None),
    }


@dataclass
class LatencyResult:
    runs: int
    handler_seen: list[float] = field(default_factory=list)
    api_cancelled: list[float] = field(default_factory=list)
    not_seen: int = 0

    def to_dict(self) -> dict[str, Any]:
        seen, api = _summary(self.handler_seen), _summary(self.api_cancelled)
        return {
            "runs": self.runs,
            "handler_seen_seconds": seen,
            "api_cancelled_seconds": api,
            "not_seen": self.not_seen,
            "goal": {"handler_p95_seconds": GOAL_HANDLER_P95_SECONDS, "api_seconds": GOAL_API_SECONDS},
            "goal_met": bool(
                not self.not_seen
                and seen["p95"] is not None
                and seen["p95"] <= GOAL_HANDLER_P95_SECONDS
                and api["max"] is not None
                and api["max"] <= GOAL_API_SECONDS
            ),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }


def _wait(predicate: Any, timeout: float, interval: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return None


def run_latency(runs: int = 20, *, seed: int = 1) -> LatencyResult:
    """Start the embedded mode, cancel ``runs`` running probes one after the other, measure."""
    from jobsched.local.config import LocalConfig
    from jobsched.local.embedded import EmbeddedMode

    register_probe()
    rng = random.Random(seed)
    result = LatencyResult(runs=runs)
    local = LocalConfig(port=0, tenants={TENANT: TOKEN}, demo=False)
    with EmbeddedMode(local, out=lambda _line: None) as mode:
        client = ApiClient(mode.api_url, token=TOKEN, timeout=30)
        created = client.create_job(
            {
                "name": "cancel-bench",
                "schedule": "@yearly",
                "target": {"handler": PROBE_HANDLER},
                "payload": {"seconds": 60},
                "retry": {"max_attempts": 1},
            }
        )
        for _ in range(runs):
            run_id = client.trigger_job(created["id"])["id"]
            if _wait(lambda rid=run_id: rid in PROBES.started, 60, 0.02) is None:
                result.not_seen += 1
                continue
            time.sleep(rng.uniform(0.5, 2.5))
            sent = time.monotonic()
            client.cancel_run(run_id)
            ended = _wait(lambda rid=run_id: client.get_run(rid)["state"] == "cancelled", 30, 0.05)
            if ended is None:
                result.not_seen += 1
                continue
            result.api_cancelled.append(time.monotonic() - sent)
            if run_id in PROBES.seen:
                result.handler_seen.append(PROBES.seen[run_id] - sent)
            else:
                result.not_seen += 1
    return result


def run_cost(seconds: float = 60.0) -> dict[str, Any]:
    """Meter one ``demo.sleep`` of ``seconds`` real seconds under the deployed lease and cancel poll."""
    import jobsched.targets.demo  # noqa: F401  (registers demo.sleep)
    from jobsched.aws.clients import Clients
    from jobsched.aws.metering import Meter, dynamo_for
    from jobsched.aws.runs_store import RunsStore
    from jobsched.bench.environment import bench_environment
    from jobsched.compose.pipeline import DEFAULT_LEASE_SECONDS, worker_from_settings
    from jobsched.core.messages import RunMessage
    from jobsched.core.models import RetrySpec, Run, make_run_id
    from jobsched.runtime import resources
    from jobsched.runtime.clock import SystemClock
    from jobsched.runtime.settings import Settings
    from jobsched.services.worker import CANCEL_POLL_SECONDS

    clock = SystemClock()
    with bench_environment(resources.DEFAULT_SHARDS, clock):
        settings, clients, meter = Settings.from_env(), Clients(), Meter()
        now = clock.now()
        run = Run(
            id=make_run_id("costjob", now),
            job_id="costjob",
            tenant=TENANT,
            scheduled_at=now,
            due_at=now,
            max_attempts=1,
            created_at=now,
        )
        RunsStore(dynamo_for(settings, clients.dynamodb, Meter()), settings.runs_table).create(run)
        message = RunMessage(
            run_id=run.id,
            job_id=run.job_id,
            tenant=TENANT,
            attempt=1,
            scheduled_at=now,
            due_at=now,
            target={"handler": "demo.sleep"},
            payload={"seconds": seconds},
            timeout_seconds=int(seconds) + 60,
            retry=RetrySpec(max_attempts=1),
        )
        deliveries = worker_from_settings(settings, clients, clock, "worker:cost-bench", meter=meter)
        # A warm container: the tenant's limits are cached (one read per container, tenant and minute,
        # not per running minute); that read is left out of the figures.
        gate = deliveries.worker.limits
        if gate is not None:
            gate.tenants.effective(TENANT)
        warm = meter.snapshot()
        started = time.monotonic()
        outcome = deliveries.handle(Delivery.of(message.to_json()), clock.now())
        elapsed = time.monotonic() - started
    snap = meter.snapshot()
    requests = {
        op: n - warm["requests"].get(op, 0)
        for op, n in snap["requests"].items()
        if n - warm["requests"].get(op, 0)
    }
    per_minute = 60.0 / elapsed
    reads = requests.get("dynamodb.BatchGetItem", 0)  # the one run's share of the board's batched reads
    # The claim and the ending are per run, not per minute: the rest of the UpdateItems are heartbeats.
    beats = max(0, requests.get("dynamodb.UpdateItem", 0) - 2)
    rru = snap["dynamodb"]["rcu"] - warm["dynamodb"]["rcu"]
    watch_usd = rru * per_minute * US_EAST_1.dynamodb_rru
    heartbeat_usd = beats * per_minute * (US_EAST_1.dynamodb_wru + US_EAST_1.sqs_request)
    return {
        "outcome": str(outcome.status),
        "running_seconds": round(elapsed, 2),
        "cancel_poll_seconds": CANCEL_POLL_SECONDS,
        "lease_seconds": DEFAULT_LEASE_SECONDS,
        "requests": requests,
        "watch_reads_per_minute": round(reads * per_minute, 1),
        "watch_rru_per_minute": round(rru * per_minute, 1),
        "heartbeat_writes_per_minute": round(beats * per_minute, 1),
        "heartbeat_sqs_requests_per_minute": round(beats * per_minute, 1),
        "usd_per_million_running_minutes": {
            "cancel_watch": round(watch_usd * MILLION, 3),
            "heartbeat": round(heartbeat_usd * MILLION, 3),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobsched.bench.cancel", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--runs", type=int, default=20, help="runs cancelled in the latency part (20)")
    parser.add_argument("--cost-seconds", type=float, default=60.0, help="running time metered (60 s)")
    parser.add_argument("--no-cost", action="store_true", help="skip the cost part")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency part")
    parser.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.cost_seconds < 5:
        parser.error("--runs must be at least 1 and --cost-seconds at least 5")
    stdout = sys.stdout
    figures: dict[str, Any] = {"measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
    with open(os.devnull, "w") as sink:
        sys.stdout = sink  # the functions' JSON logs and EMF lines
        try:
            if not args.no_cost:
                figures["cost"] = run_cost(args.cost_seconds)
            if not args.no_latency:
                figures["latency"] = run_latency(args.runs).to_dict()
        finally:
            sys.stdout = stdout
    if args.json:
        print(json.dumps(figures, separators=(",", ":")))
    else:
        print(json.dumps(figures, indent=2))
    latency = figures.get("latency")
    return 1 if latency and latency["not_seen"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
