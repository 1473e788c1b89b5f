"""The embedded-mode schedule lag benchmark: a burst of one-off runs due in the same second.

``run_lag`` starts the embedded mode in-process (:class:`jobsched.local.embedded.EmbeddedMode`: moto
server, pollers, ticks, HTTP bridge -- exactly what ``jobsched dev`` runs), creates ``runs`` one-off
jobs ``at(T)`` through the HTTP API, all due at the same whole second ``T`` a few seconds ahead, waits
until every run has started, and computes each run's lag = start of its first attempt - due instant,
from the run records. The lag includes SQS's whole-second ``DelaySeconds`` rounding, the pollers'
receive latency and the queueing of the burst behind the worker slots.

This is a wall-clock measurement by nature (it measures the live system), so it is the one place in
the benchmarks that reads the real time; nothing in it is asserted on in tests except its shape.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.aws.metering import deserialize
from jobsched.client import ApiClient
from jobsched.core.ids import run_key_for
from jobsched.core.models import from_iso, to_iso
from jobsched.local.config import LocalConfig
from jobsched.local.embedded import EmbeddedMode
from jobsched.runtime import resources

GOAL_P99_SECONDS = 1.0
LAG_TENANT = "bench"
LAG_TOKEN = "bench-lag-token"  # only ever valid inside the benchmark's own embedded mode


@dataclass(frozen=True)
class LagConfig:
    runs: int = 100
    lead_seconds: float = 3.0  # at least this far ahead of the end of the (estimated) creation
    create_threads: int = 8
    timeout_seconds: float = 60.0  # after the due instant, give up waiting for runs to start
    handler: str = "demo.echo"


@dataclass
class LagResult:
    config: LagConfig
    due_at: datetime
    lags: list[float]
    created: int
    creation_seconds: float
    late_creations: int  # jobs whose creation completed after their due instant (their lag is inflated)
    missing: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        p50, p99 = percentile(self.lags, 50), percentile(self.lags, 99)
        return {
            "runs": self.config.runs,
            "started": len(self.lags),
            "p50_seconds": _round(p50),
            "p99_seconds": _round(p99),
            "max_seconds": _round(max(self.lags) if self.lags else None),
            "min_seconds": _round(min(self.lags) if self.lags else None),
            "goal_p99_seconds": GOAL_P99_SECONDS,
            "goal_met": bool(p99 is not None and p99 < GOAL_P99_SECONDS and not self.missing),
            "not_started": len(self.missing),
            "setup": {
                "due_at": to_iso(self.due_at),
                "jobs_created": self.created,
                "creation_seconds": round(self.creation_seconds, 2),
                "late_creations": self.late_creations,
                "handler": self.config.handler,
                "worker_slots": LocalConfig().slots,
                "batch_size": LocalConfig().batch_size,
                "load_average_1m": round(os.getloadavg()[0], 2),  # the machine was shared with this load
            },
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile (the smallest value with at least ``pct`` % of the values at or below it)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def _first_start(item: dict[str, Any]) -> datetime | None:
    attempts = item.get("attempts") or []
    if attempts and attempts[0].get("started_at"):
        return from_iso(attempts[0]["started_at"])
    return from_iso(item["started_at"]) if item.get("started_at") else None


def _read_runs(mode: EmbeddedMode, job_ids: set[str], due_at: datetime) -> dict[str, dict[str, Any]]:
    """job id -> its run item (the one-off run of ``at(due_at)``), read by key from the Runs table.

    By key, 100 at a time: a scan of the table would cost the emulated DynamoDB far more while the
    runs it measures are still going through it."""
    assert mode.provisioned is not None
    table = mode.provisioned.tables[resources.ENV_RUNS_TABLE]
    run_key = run_key_for(due_at)
    found: dict[str, dict[str, Any]] = {}
    ids = sorted(job_ids)
    for start in range(0, len(ids), 100):
        keys = [{"job_id": {"S": j}, "run_key": {"S": run_key}} for j in ids[start : start + 100]]
        request: dict[str, Any] = {table: {"Keys": keys}}
        while request:
            response = mode.clients["dynamodb"].batch_get_item(RequestItems=request)
            for wire in response.get("Responses", {}).get(table, []):
                item = deserialize(wire)
                found[item["job_id"]] = item
            request = response.get("UnprocessedKeys") or {}
    return found


def _one_off(due_at: datetime, handler: str) -> dict[str, Any]:
    return {
        "name": "lag-bench",
        "schedule": f"at({due_at.strftime('%Y-%m-%dT%H:%M:%S')})",
        "timezone": "UTC",
        "target": {"handler": handler},
        "payload": {"bench": "lag"},
    }


def _probe_creation_seconds(client: ApiClient, handler: str) -> float:
    """Time one job creation (a job due in a day, deleted again): how far ahead the burst must be due
    for its creation to finish first, on this machine, under its current load."""
    started = time.perf_counter()
    job = client.create_job(_one_off(datetime.now(UTC) + timedelta(days=1), handler))
    seconds = time.perf_counter() - started
    client.delete_job(job["id"], version=job["version"])
    return seconds


def run_lag(config: LagConfig | None = None, *, out: Any = None) -> LagResult:
    """Start the embedded mode, fire the burst, measure; the embedded mode is stopped on return."""
    config = config or LagConfig()
    local = LocalConfig(port=0, tenants={LAG_TENANT: LAG_TOKEN})
    with EmbeddedMode(local, out=out or (lambda _line: None)) as mode:
        client = ApiClient(mode.api_url, token=LAG_TOKEN, timeout=30)
        per_job = _probe_creation_seconds(client, config.handler)
        # The creations share one interpreter (and two cores) with moto: assume no parallel speed-up.
        estimate = 1.2 * per_job * config.runs
        ahead = datetime.now(UTC) + timedelta(seconds=config.lead_seconds + estimate)
        due_at = ahead.replace(microsecond=0) + timedelta(seconds=1)  # a whole second
        spec = _one_off(due_at, config.handler)

        def create(_: int) -> tuple[str, datetime]:
            job = client.create_job(spec)
            return job["id"], datetime.now(UTC)

        started = time.perf_counter()
        with ThreadPoolExecutor(config.create_threads) as pool:
            created = list(pool.map(create, range(config.runs)))
        creation_seconds = time.perf_counter() - started
        job_ids = {job_id for job_id, _ in created}
        late = sum(1 for _, done in created if done > due_at)

        # Reading the table loads the same moto server the runs go through: wait until 3 s after the
        # due instant, then look once a second (the start instants are read from the records, so
        # looking later changes no figure).
        time.sleep(max(0.0, (due_at - datetime.now(UTC)).total_seconds() + 3.0))
        deadline = due_at + timedelta(seconds=config.timeout_seconds)
        runs: dict[str, dict[str, Any]] = {}
        while True:
            runs = _read_runs(mode, job_ids, due_at)
            done = len(runs) == len(job_ids) and all(_first_start(i) for i in runs.values())
            if done or datetime.now(UTC) >= deadline:
                break
            time.sleep(1.0)
        lags = []
        missing = []
        for job_id in sorted(job_ids):
            item = runs.get(job_id)
            start = _first_start(item) if item else None
            if item is None or start is None:
                missing.append(job_id)
                continue
            lags.append((start - from_iso(item["due_at"])).total_seconds())
    return LagResult(
        config=config,
        due_at=due_at,
        lags=lags,
        created=len(job_ids),
        creation_seconds=creation_seconds,
        late_creations=late,
        missing=missing,
    )
