"""Logging and metrics shared by the worker, the DLQ consumer, the sweeper and the dispatcher.

Metrics are CloudWatch EMF through Powertools (:func:`make_metrics`, one per function); services
emit through a small :class:`MetricSink` so they stay testable and the local mode can print or count them.
Cardinality: metrics carry only the ``service`` default dimension; a figure per priority is a metric
per priority (:func:`oldest_queued_run_age`: three names), a figure per pool a metric per pool
(:func:`pool_metric`, :func:`add_per_pool`), a skip reason a metric per reason (:func:`skipped_metric`).
Never a per-run, per-job or per-tenant dimension: each distinct dimension set is a separate billed
metric. Per-run detail belongs in the
structured log line (job/run/attempt/tenant keys).

Run keys in every line (:func:`run_log_keys`, :class:`RunKeysFilter`, :func:`configure_function_logging`):
while a run is handled its keys sit in a context variable; the worker's own threads (the handler's,
the heartbeat's, the cancel watch's) start in a copy of the context (``contextvars.copy_context``),
so they see the same keys; a filter on the log handlers copies them onto every record, whatever the
logger (ours, a handler's ``logging.getLogger(...)``, a library's) and whatever the thread. Each
function sends its Powertools logger's lines, the ``jobsched`` loggers' and the root logger's (every
other logger propagates there) as Powertools JSON to stdout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Protocol

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from jobsched.runtime.resources import POOLS, PRIORITIES

NAMESPACE = "jobsched"

SCHEDULE_LAG = "ScheduleLag"  # seconds between a run's due instant and its attempt's start
RUN_DURATION = "RunDuration"  # seconds a target ran, per attempt
RUNS_SUCCEEDED = "RunsSucceeded"
#: attempts a worker executed that failed: retried, dead-lettered, or lost (their lease taken over)
RUNS_FAILED = "RunsFailed"
RUNS_RETRIED = "RunsRetried"
RUNS_DEAD_LETTERED = "RunsDeadLettered"
RUNS_SKIPPED = "RunsSkipped"
RUNS_CANCELLED = "RunsCancelled"
CHUNKED_RUNS_STARTED = "ChunkedRunsStarted"  # worker: chunked runs handed to a new execution
RUNS_RESENT = "RunsResent"  # sweeper: lost sends re-sent
RUNS_RECLAIMED = "RunsReclaimed"  # sweeper: expired leases handed to a new attempt
RUNS_STRANDED = "RunsStranded"  # sweeper: runs given up on, failed with reason stranded (dead letters)
POISON_MESSAGES = "PoisonMessages"  # DLQ consumer
RUNS_MISSED_DEADLINE = "RunsMissedDeadline"  # sweeper: runs (or occurrences with no run) past their deadline
NOTIFICATIONS_SENT = "NotificationsSent"  # dead-letter notifications delivered (per destination)
NOTIFICATIONS_FAILED = "NotificationsFailed"  # dead-letter notifications given up
JOBS_HELD_BACK = "JobsHeldBack"  # dispatcher: due jobs left for a later tick (backpressure)
JOBS_CAPPED = "JobsCapped"  # dispatcher: due jobs held, their tenant over its monthly budget (0062)
LIMIT_WAITS = "LimitWaits"  # worker: deliveries held back by a concurrency or rate limit (no attempt used)
SHARE_REFUSED = "ShareRefused"  # worker: records left in the queue, their tenant holding its share (0057)
SHARE_HELD = "ShareHeld"  # worker: batches that waited in the head-room and took a slot the tenant freed
SHARE_OVER = "ShareOver"  # worker: invocations that found their tenant over its share when registering
LIMIT_SLOTS_LOST = "LimitSlotsLost"  # worker: a running run's slot lease ended and the semaphore was full
#: sweeper, once per sweep and priority: seconds since the due instant of the oldest run still
#: ``queued`` (past due, not waiting for a limit), 0 when there is none. The name ends with the priority.
OLDEST_QUEUED_RUN_AGE = "OldestQueuedRunAge"


def oldest_queued_run_age(priority: str) -> str:
    """The metric of ``priority``'s oldest queued run: ``OldestQueuedRunAgeHigh``, ``...Default``..."""
    return f"{OLDEST_QUEUED_RUN_AGE}{priority.title()}"


#: emitted once a minute per pool: the concurrency the forecast's busiest coming minute needs, and the
#: pool's current ceiling (names end with the pool: :func:`pool_metric`).
FORECAST_CONCURRENCY = "ForecastConcurrency"
POOL_CAPACITY = "PoolCapacity"


def pool_metric(name: str, pool: str) -> str:
    """A figure per pool is a metric per pool, as per priority: ``RunDurationLambda``, ``...Long``..."""
    return f"{name}{pool.title()}"


#: The worker's figures it also emits per pool (:func:`add_per_pool`): ``ScheduleLagLambda``,
#: ``RunsSucceededContainer``... (6 names x 3 pools, the dashboard's per-pool rows and alarms).
PER_POOL = (SCHEDULE_LAG, RUN_DURATION, RUNS_SUCCEEDED, RUNS_FAILED, RUNS_RETRIED, RUNS_DEAD_LETTERED)

#: Why a run was recorded skipped (the dispatcher's: misfire, dst_gap, overlap; a tick that finds its
#: job paused, deleted or edited since it read it: paused, deleted, rescheduled; a tenant over its
#: monthly budget: budget, decision 0062). The dispatcher emits
#: ``RunsSkipped`` and one ``RunsSkipped<Reason>`` per reason (:func:`skipped_metric`): a bounded set of
#: names, never a dimension; a reason outside it counts as ``other``.
SKIP_REASONS = ("misfire", "dst_gap", "overlap", "paused", "deleted", "rescheduled", "budget", "other")


def skipped_metric(reason: str) -> str:
    """The metric of runs skipped for ``reason``: ``RunsSkippedMisfire``, ``RunsSkippedDstGap``..."""
    known = reason if reason in SKIP_REASONS else "other"
    return RUNS_SKIPPED + known.title().replace("_", "")


def add_per_pool(sink: MetricSink, name: str, pool: str, value: float = 1) -> None:
    """One data point of ``name`` and the same of its pool's metric (:func:`pool_metric`): the
    deployment's total stays where the existing alarms and usage read it, the pool's feeds its row of
    the dashboard. A pool outside :data:`POOLS` (none is) would be counted in the total only."""
    sink.add(name, value)
    if pool in POOLS:
        sink.add(pool_metric(name, pool), value)


UNITS = {
    SCHEDULE_LAG: MetricUnit.Seconds,
    RUN_DURATION: MetricUnit.Seconds,
    **{oldest_queued_run_age(p): MetricUnit.Seconds for p in PRIORITIES},
    **{pool_metric(n, p): MetricUnit.Seconds for n in (SCHEDULE_LAG, RUN_DURATION) for p in POOLS},
}


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


class LogStream(Protocol):
    """Where log lines can go: anything with ``write`` (``flush`` too, if it has one)."""

    def write(self, text: str, /) -> Any: ...


class CurrentStdout:
    """Where the functions' log handlers write: ``sys.stdout`` as it is when a line is written, or the
    stream :func:`set_log_stream` fixed.

    A handler given ``sys.stdout`` itself keeps the stream of the moment it was made. When that was a
    replacement that has since been closed (pytest's ``capsys``, in a user's test of their handlers or
    ours), every later line became ``--- Logging error ---`` on stderr instead. On Lambda, and in
    ``jobsched dev`` (whose ``sys.stdout`` is its log file while the embedded mode runs), the lines go
    where they went.
    """

    def __init__(self) -> None:
        self.fixed: LogStream | None = None

    def _target(self) -> LogStream:
        return self.fixed if self.fixed is not None else sys.stdout

    def write(self, text: str) -> Any:
        return self._target().write(text)

    def flush(self) -> None:
        flush = getattr(self._target(), "flush", None)
        if flush is not None:
            flush()


_STDOUT = CurrentStdout()


def set_log_stream(stream: LogStream | None) -> LogStream | None:
    """Send every function's log lines (its Powertools logger's, the ``jobsched`` loggers', the root
    logger's JSON handler's) to ``stream`` from now on, whatever ``sys.stdout`` becomes; ``None``, the
    default, follows ``sys.stdout`` line by line. Returns the previous setting, to restore it.

    For a test process: while pytest's ``capsys`` is active ``sys.stdout`` is the test's capture, so
    by default a line a thread writes then (another test's leftover thread included) is part of that
    test's output; ``set_log_stream(sys.__stdout__)`` keeps them out of it (pytest's own capture still
    shows them in the test's report).
    """
    previous, _STDOUT.fixed = _STDOUT.fixed, stream
    return previous


def make_logger(service: str) -> Logger:
    """A Powertools logger for one function (JSON lines on :class:`CurrentStdout`; level from
    ``POWERTOOLS_LOG_LEVEL``)."""
    return Logger(service=service, stream=_STDOUT)  # type: ignore[arg-type]  # writes, flushes: enough


class FunctionMetrics(EphemeralMetrics):
    """``EphemeralMetrics`` that forgets its data points at every flush, printed or not.

    Powertools skips the print *and the clearing* when ``POWERTOOLS_METRICS_DISABLED`` is set (the
    embedded mode's default, the benchmarks'), so a long-running process kept every data point of
    every invocation: memory that only grew. A flush is the end of an invocation either way.
    """

    def flush_metrics(self, raise_on_empty_metrics: bool = False) -> None:
        try:
            super().flush_metrics(raise_on_empty_metrics=raise_on_empty_metrics)
        finally:
            self.clear_metrics()


def make_metrics(service: str) -> EphemeralMetrics:
    """A Powertools metrics object: namespace ``jobsched``, only the ``service`` dimension.

    ``EphemeralMetrics``, not ``Metrics``: every ``Metrics`` instance of a process shares one
    class-level metric set and dimension set. On AWS each function has its own process, but the
    embedded mode runs all of them in one, where a dispatcher tick then flushed the worker's metrics
    with ``"service": "dispatcher"``. Each function's own set keeps its metrics and its service apart.
    """
    return FunctionMetrics(namespace=NAMESPACE, service=service)


#: The keys of the run being handled in this context (empty outside a run).
_NO_KEYS: Mapping[str, Any] = MappingProxyType({})
_RUN_KEYS: ContextVar[Mapping[str, Any]] = ContextVar("jobsched_run_log_keys", default=_NO_KEYS)


@contextlib.contextmanager
def run_log_keys(**keys: Any) -> Iterator[None]:
    """While active, every log record of this context (and of threads started in a copy of it)
    carries ``keys`` (those not None), over the keys bound by an enclosing call."""
    token = _RUN_KEYS.set({**_RUN_KEYS.get(), **{k: v for k, v in keys.items() if v is not None}})
    try:
        yield
    finally:
        _RUN_KEYS.reset(token)


def current_run_keys() -> dict[str, Any]:
    """The run keys bound in this context ({} outside a run)."""
    return dict(_RUN_KEYS.get())


#: The tenant a request is being served for outside a run (the API's caller, a backfill's tenant).
_LANE: ContextVar[str | None] = ContextVar("jobsched_request_lane", default=None)


@contextlib.contextmanager
def request_lane(tenant: str | None) -> Iterator[None]:
    """While active, the AWS requests of this context are made for ``tenant`` (see
    :func:`current_lane`); log lines are unchanged."""
    token = _LANE.set(tenant)
    try:
        yield
    finally:
        _LANE.reset(token)


def current_lane() -> str:
    """The tenant this context's AWS requests are made for: the one :func:`request_lane` set, else the
    tenant of the run being handled, else "" (the system's own work: ticks, sweeps). The embedded mode
    tags its DynamoDB requests with it, and its emulated DynamoDB keeps tenants apart."""
    lane = _LANE.get()
    if lane is None:
        tenant = _RUN_KEYS.get().get("tenant")
        lane = tenant if isinstance(tenant, str) else None
    return lane or ""


#: The service of the function whose invocation runs in this context, when several functions share a
#: process (the embedded mode); None on Lambda, where a process is one function.
_SERVICE: ContextVar[str | None] = ContextVar("jobsched_function_service", default=None)


@contextlib.contextmanager
def function_service(service: str) -> Iterator[None]:
    """While active, every log line of this context names ``service`` (the embedded mode runs every
    function in one process: without it, the ``jobsched`` loggers' lines would name whichever function
    configured logging last)."""
    token = _SERVICE.set(service)
    try:
        yield
    finally:
        _SERVICE.reset(token)


class RunKeysFilter(logging.Filter):
    """Copies the context's run keys onto each record it sees (keys the record already has win), so
    the Powertools formatter writes them into the JSON line, and the context's function service
    (:func:`function_service`) as ``service``. Installed on handlers, not loggers: a handler's filter
    sees the records of every logger that propagates to it."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _RUN_KEYS.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        service = _SERVICE.get()
        if service is not None and not hasattr(record, "service"):
            record.service = service
        return True


_ROOT_HANDLER_NAME = "jobsched-root-json"


def _with_run_keys(handler: logging.Handler) -> logging.Handler:
    if not any(isinstance(f, RunKeysFilter) for f in handler.filters):
        handler.addFilter(RunKeysFilter())
    return handler


def configure_function_logging(logger: Logger) -> None:
    """Every line a function's process writes, as Powertools JSON with the run's keys.

    - ``logger`` (the function's Powertools logger) and the ``jobsched`` loggers share its handler
      (Powertools ``copy_config_to_registered_loggers``), which gets a :class:`RunKeysFilter`;
    - the root logger, where every other logger's records end (a job handler's own
      ``logging.getLogger(...)``, libraries), gets one JSON handler on stdout (:class:`CurrentStdout`)
      with the same filter and the Powertools formatter (``service`` = ``$POWERTOOLS_SERVICE_NAME``,
      plus the logger's ``name``), replacing the handlers found there (on Lambda, the runtime's plain
      one), at ``logger``'s level.

    Idempotent: the embedded mode configures each of its functions in one process.
    """
    _with_run_keys(logger.registered_handler)
    logging.getLogger(logger.name).propagate = False  # its handler is not root's: no line twice
    copy_config_to_registered_loggers(source_logger=logger, include={"jobsched"})
    root = logging.getLogger()
    ours = next((h for h in root.handlers if h.get_name() == _ROOT_HANDLER_NAME), None)
    if ours is None:
        ours = logging.StreamHandler(_STDOUT)
        ours.set_name(_ROOT_HANDLER_NAME)
        service = os.environ.get("POWERTOOLS_SERVICE_NAME") or logger.service
        ours.setFormatter(LambdaPowertoolsFormatter(service=service, name="%(name)s"))
        _with_run_keys(ours)
    for handler in list(root.handlers):
        # pytest's capture handler stays (caplog); anything else (Lambda's own) would print it twice
        if handler is not ours and type(handler).__module__ != "_pytest.logging":
            root.removeHandler(handler)
    if ours not in root.handlers:
        root.addHandler(ours)
    root.setLevel(logger.log_level)


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
