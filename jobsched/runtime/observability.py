"""Logging and metrics shared by the worker, the DLQ consumer, the sweeper and the dispatcher.

Metrics are CloudWatch EMF through Powertools (:func:`make_metrics`, one per function); services
emit through a small :class:`MetricSink` so they stay testable and the local mode can print or count them.
Cardinality: metrics carry only the ``service`` default dimension (and ``priority`` where it says
so: three values). Never a per-run, per-job or per-tenant dimension: each distinct dimension set is a
separate billed metric. Per-run detail belongs in the structured log line (job/run/attempt/tenant keys).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any, Protocol

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

NAMESPACE = "jobsched"

SCHEDULE_LAG = "ScheduleLag"  # seconds between a run's due instant and its attempt's start
RUN_DURATION = "RunDuration"  # seconds a target ran, per attempt
RUNS_SUCCEEDED = "RunsSucceeded"
RUNS_FAILED = "RunsFailed"  # attempts that failed (retried or not)
RUNS_RETRIED = "RunsRetried"
RUNS_DEAD_LETTERED = "RunsDeadLettered"
RUNS_SKIPPED = "RunsSkipped"
RUNS_CANCELLED = "RunsCancelled"
RUNS_RESENT = "RunsResent"  # sweeper: lost sends re-sent
RUNS_RECLAIMED = "RunsReclaimed"  # sweeper: expired leases handed to a new attempt
RUNS_STRANDED = "RunsStranded"  # sweeper: runs given up on, failed with reason stranded (dead letters)
POISON_MESSAGES = "PoisonMessages"  # DLQ consumer
JOBS_HELD_BACK = "JobsHeldBack"  # dispatcher: due low jobs left for a later tick (backpressure)

UNITS = {SCHEDULE_LAG: MetricUnit.Seconds, RUN_DURATION: MetricUnit.Seconds}


class MetricSink(Protocol):
    def add(self, name: str, value: float = 1) -> None:
        """Record one data point of metric ``name``."""
        ...


class PowertoolsSink:
    """Emits through a Powertools ``Metrics`` instance (EMF on flush at the end of the invocation)."""

    def __init__(self, metrics: EphemeralMetrics):
        self._metrics = metrics

    def add(self, name: str, value: float = 1) -> None:
        self._metrics.add_metric(name=name, unit=UNITS.get(name, MetricUnit.Count), value=value)


class LockedSink:
    """A metric sink safe to share between threads (Powertools ``Metrics`` is not): the worker's
    record threads of one batch."""

    def __init__(self, sink: MetricSink):
        self._sink = sink
        self._lock = threading.Lock()

    def add(self, name: str, value: float = 1) -> None:
        with self._lock:
            self._sink.add(name, value)


class RecordingSink:
    """Keeps every data point in memory: tests and the local mode's summary."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.points: dict[str, list[float]] = defaultdict(list)

    def add(self, name: str, value: float = 1) -> None:
        with self._lock:
            self.points[name].append(value)

    def count(self, name: str) -> int:
        return len(self.points.get(name, []))


class NullSink:
    def add(self, name: str, value: float = 1) -> None:
        pass


def make_logger(service: str) -> Logger:
    """A Powertools logger for one function (JSON lines; level from ``POWERTOOLS_LOG_LEVEL``)."""
    return Logger(service=service)


def make_metrics(service: str) -> EphemeralMetrics:
    """A Powertools metrics object: namespace ``jobsched``, only the ``service`` dimension.

    ``EphemeralMetrics``, not ``Metrics``: every ``Metrics`` instance of a process shares one
    class-level metric set and dimension set. On AWS each function has its own process, but the
    embedded mode runs all of them in one, where a dispatcher tick then flushed the worker's metrics
    with ``"service": "dispatcher"``. Each function's own set keeps its metrics and its service apart.
    """
    return EphemeralMetrics(namespace=NAMESPACE, service=service)


def run_keys(*, job_id: str, run_id: str, attempt: int, tenant: str) -> dict[str, Any]:
    """The structured-log keys every line about a run carries."""
    return {"job_id": job_id, "run_id": run_id, "attempt": attempt, "tenant": tenant}


def log_keys_of(body: str) -> dict[str, Any]:
    """The run keys of a raw run message, for the log context before it is parsed properly ({} if
    the body is not a run message)."""
    import json

    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    keys = ("job_id", "run_id", "attempt", "tenant")
    return {k: data[k] for k in keys if isinstance(data.get(k), str | int)}
