"""The limits benchmark (``jobsched bench --limits``): what a limit costs per run, what a wait costs,
and how closely a rate limit holds its rate over a minute.

* **cost** (in-process moto, simulated clock; :func:`run_cost`): ``runs`` runs of ``demo.echo``
  processed by the worker as deployed (:func:`jobsched.compose.pipeline.worker_from_settings`), once
  without limits and once with a concurrency limit and a rate limit that never make a run wait
  (``limit`` 1000, 1000/s with a burst of 1000): the difference is the price of being limited.
  Then one **wait**: a run whose key's only slot is held by another run, delivered from the queue
  (so it registers as a waiter), and the release that wakes it. Each figure is the requests and
  request units the meter counted (:mod:`jobsched.aws.metering`), priced at us-east-1 list prices;
  Lambda is left out (the same invocation handles a run either way; a wait is a delivery of a few
  milliseconds).
* **rate** (the embedded mode, real time; :func:`run_rate`): a job with ``rate_limit`` of
  ``per_second`` runs a second, burst 1, and a backfill of more runs than a minute holds; the starts
  (each run's first attempt) counted over one minute, from 5 s after the first start, against the
  configured rate. A wall-clock measurement of a live system: it depends on the machine's load.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
import warnings
from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.aws.clients import Clients
from jobsched.aws.metering import Meter
from jobsched.aws.runs_store import RunsStore
from jobsched.bench.pricing import Usage, cost_of
from jobsched.core.clock import FakeClock
from jobsched.core.messages import RunMessage
from jobsched.core.models import RetrySpec, Run, from_iso, make_run_id
from jobsched.services.deliveries import Delivery

LIMITED = {
    "concurrency": {"key": "bench", "limit": 1000},
    "rate_limit": {"key": "bench", "per_second": 1000.0, "burst": 1000},
}
START = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RATE_TOKENS = {"bench": "bench-limits-token"}


def _usage(meter: Meter) -> Usage:
    snap = meter.snapshot()
    return Usage(
        wru=snap["dynamodb"]["wcu"], rru=snap["dynamodb"]["rcu"], sqs_requests=meter.sqs_billed_requests
    )


def _requests(meter: Meter) -> int:
    return sum(meter.requests.values())


def _figures(meter: Meter, runs: int) -> dict[str, Any]:
    usage = _usage(meter).per_run(runs)
    return {
        "requests_per_run": round(_requests(meter) / runs, 3),
        "wru_per_run": round(usage.wru, 3),
        "rru_per_run": round(usage.rru, 3),
        "sqs_requests_per_run": round(usage.sqs_requests, 3),
        "usd_per_million_runs": round(cost_of(usage).total * 1_000_000, 4),
        "by_operation": dict(sorted(meter.requests.items())),
    }


def _new_run(runs: RunsStore, job_id: str, at: datetime, limits: dict[str, Any]) -> RunMessage:
    run = Run(
        id=make_run_id(job_id, at), job_id=job_id, tenant="bench", scheduled_at=at, due_at=at, created_at=at
    )
    runs.create(run)
    return RunMessage(
        run_id=run.id,
        job_id=job_id,
        tenant="bench",
        attempt=1,
        scheduled_at=at,
        due_at=at,
        target={"handler": "demo.echo"},
        payload={"n": 1},
        retry=RetrySpec(),
        **limits,
    )


def run_cost(runs: int = 200) -> dict[str, Any]:
    """Per-run cost without and with limits, and the cost of one wait and its wake-up (moto)."""
    import jobsched.targets.demo  # noqa: F401  (registers demo.echo)
    from jobsched.bench.environment import bench_environment
    from jobsched.compose.pipeline import worker_from_settings
    from jobsched.runtime.settings import Settings

    clock = FakeClock(START)
    with bench_environment(1, clock):
        settings, clients = Settings.from_env(), Clients()
        out: dict[str, Any] = {"runs": runs}
        for name, limits in (("unlimited", {}), ("limited", LIMITED)):
            meter = Meter()
            deliveries = worker_from_settings(settings, clients, clock, f"bench-{name}", meter=meter)
            store = RunsStore(deliveries.worker.attempts.dynamo, settings.runs_table)
            messages = [
                _new_run(store, f"job-{name}", START + timedelta(minutes=i), limits) for i in range(runs)
            ]
            meter.reset()
            for msg in messages:
                clock.set(max(clock.now(), msg.due_at))
                outcome = deliveries.handle(Delivery.of(msg.to_json()), clock.now())
                assert outcome.status == "succeeded", outcome
            out[name] = _figures(meter, runs)
        out["extra_usd_per_million_limited_runs"] = round(
            out["limited"]["usd_per_million_runs"] - out["unlimited"]["usd_per_million_runs"], 4
        )
        out["wait"] = _one_wait(settings, clients, clock)
    return out


def _one_wait(settings: Any, clients: Clients, clock: FakeClock) -> dict[str, Any]:
    from jobsched.compose.pipeline import worker_from_settings

    meter = Meter()
    deliveries = worker_from_settings(settings, clients, clock, "bench-wait", meter=meter)
    worker, gate = deliveries.worker, deliveries.worker.limits
    assert gate is not None
    store = RunsStore(worker.attempts.dynamo, settings.runs_table)
    one = {"concurrency": {"key": "one-slot", "limit": 1}}
    at = clock.now()
    holder = _new_run(store, "job-hold", at, one)
    waiting = _new_run(store, "job-wait", at + timedelta(seconds=1), one)
    held = gate.admit(holder, clock.now(), None, None, "another-worker")
    gate.tenants.effective("bench")  # cached per container, as in a warm worker
    url = settings.queue_url("default")
    clients.sqs.send_message(QueueUrl=url, MessageBody=waiting.to_json())
    received = clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=30)[
        "Messages"
    ][0]
    meter.reset()
    outcome = worker.handle(
        Delivery(
            message_id="", body=received["Body"], receipt_handle=received["ReceiptHandle"], queue_url=url
        ),
        clock.now(),
    )
    assert outcome.status == "waiting", outcome
    wait = {"requests": _requests(meter), "by_operation": dict(sorted(meter.requests.items()))}
    wait_usage = _usage(meter)
    meter.reset()
    held.release(clock.now())
    clock.advance(timedelta(milliseconds=1))  # moto shows a message once its visibility instant is past
    woken = clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=30).get(
        "Messages", []
    )
    wake = {"requests": _requests(meter), "by_operation": dict(sorted(meter.requests.items()))}
    return {
        "wait": wait,
        "wait_usd_per_million": round(cost_of(wait_usage).total * 1_000_000, 4),
        "release_with_a_waiter": wake,
        "woken_at_once": len(woken) == 1,
    }


# --- rate over a minute (embedded mode) --------------------------------------------------------------


def run_rate(per_second: float = 5.0, backlog: int = 450, window_seconds: float = 60.0) -> dict[str, Any]:
    """The observed rate of a rate-limited job's starts over ``window_seconds`` (embedded mode, in a
    child process of its own: the functions cache their settings once per process)."""
    argv = [sys.executable, "-m", "jobsched.bench.limits", json.dumps([per_second, backlog, window_seconds])]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the rate benchmark's child failed: {done.stderr.strip()[-2000:]}")
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def _rate_once(per_second: float, backlog: int, window_seconds: float) -> dict[str, Any]:
    from jobsched.client import ApiClient
    from jobsched.local.config import LocalConfig
    from jobsched.local.embedded import EmbeddedMode

    local = LocalConfig(port=0, tenants=dict(RATE_TOKENS), demo=False)
    with EmbeddedMode(local, out=lambda _line: None) as mode:
        client = ApiClient(mode.api_url, token=RATE_TOKENS["bench"], timeout=300)
        job = client.create_job(
            {
                "name": "bench-rate",
                "schedule": "@daily",
                "target": {"handler": "demo.echo"},
                "rate_limit": {"key": "bench-api", "per_second": per_second, "burst": 1},
            }
        )
        first = datetime(2000, 1, 1, tzinfo=UTC)
        client.backfill_job(
            job["id"],
            start=first.isoformat().replace("+00:00", "Z"),
            end=(first + timedelta(days=backlog - 1)).isoformat().replace("+00:00", "Z"),
        )
        time.sleep(window_seconds + 15)
        runs = client.list_all("/runs", {"job_id": job["id"], "limit": 200})
    starts = sorted(from_iso(r["attempts"][0]["started_at"]) for r in runs if r.get("attempts"))
    if not starts:
        return {"per_second": per_second, "backlog": backlog, "started": 0, "within_10_percent": False}
    left = starts[0] + timedelta(seconds=5)
    right = left + timedelta(seconds=window_seconds)
    counted = sum(1 for s in starts if left <= s < right)
    observed = counted / window_seconds
    error = (observed - per_second) / per_second
    return {
        "per_second": per_second,
        "burst": 1,
        "backlog": backlog,
        "window_seconds": window_seconds,
        "started_in_window": counted,
        "observed_per_second": round(observed, 3),
        "error_percent": round(error * 100, 2),
        "within_10_percent": abs(error) <= 0.10,
        "waited_runs": sum(1 for r in runs if r.get("waits")),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def run_limits(runs: int = 200, rate: bool = True) -> dict[str, Any]:
    """The cost figures and, with ``rate``, the rate figures (about 80 s more)."""
    figures = {"cost": run_cost(runs)}
    if rate:
        figures["rate"] = run_rate()
    return figures


def main(argv: list[str]) -> int:
    """The rate benchmark's child: its figures as the last line of stdout (the functions' output dropped)."""
    per_second, backlog, window = json.loads(argv[0])
    out = sys.stdout
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        figures = _rate_once(float(per_second), int(backlog), float(window))
    print(json.dumps(figures), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
