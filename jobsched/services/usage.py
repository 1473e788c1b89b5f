"""Counting usage per tenant and day (docs/semantics/limits.md, "Usage per tenant"; decision 0059).

:class:`UsageRecorder` is a metric sink in front of the worker's own: every metric the worker and the
limit gate emit while a run is handled is also counted for the run's tenant (read from the run's log
keys, :func:`jobsched.runtime.observability.current_run_keys`, bound for every thread of the run):

* ``RunDuration`` (one per attempt executed): ``runs_started`` + 1, ``run_seconds`` + its value;
  ``ChunkedRunsStarted`` (a chunked run handed to a new execution): ``runs_started`` + 1;
* the ending of each started attempt, exactly one of ``RunsSucceeded``, ``RunsFailed`` (retried,
  dead-lettered or lost to a takeover) and ``RunsCancelled``, so started = succeeded + failed +
  cancelled; ``RunsDeadLettered``, ``LimitWaits`` (``throttled_waits``).

:class:`TenantMeter` is the request meter of the worker, the dispatcher, the sweeper and the API
that also keeps the units per tenant, and splits what was done for no one tenant, with the
invocation's Lambda duration and request, by the tenants' items each invocation touched. At the end
of the invocation :meth:`UsageRecorder.flush` adds each (tenant, day) to its usage item: one write
per tenant and day the invocation served, and nothing when it served no tenant
(:class:`FunctionUsage` wraps the dispatcher's, the sweeper's and the API's invocations). Metric
names carry no tenant dimension: the per-tenant figures live in DynamoDB, not in CloudWatch metrics.

Since decision 0059 was amended, :meth:`TenantMeter.record_billed` also keeps what is billed outside
the request units (Step Functions transitions, SNS publishes, Fargate seconds: :data:`BILLED`), the
DLQ consumer counts like the other functions, and what serves no tenant goes to the deployment row
(:data:`jobsched.core.usage.DEPLOYMENT`): the capacity function's meter (``TenantMeter(only=...)``)
and the mappings' empty polls the sweeper adds (:class:`MappingPolls`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from jobsched.aws.metering import Meter
from jobsched.core.clock import Clock
from jobsched.core.usage import DEPLOYMENT, DayUsage, day_of, empty_polls
from jobsched.ports.stores import UsageRecords
from jobsched.runtime import observability as obs

logger = logging.getLogger(__name__)

#: metric name -> (counter, counts the value (True) or one per data point (False))
_COUNTED: Mapping[str, tuple[tuple[str, bool], ...]] = {
    obs.RUN_DURATION: (("runs_started", False), ("run_seconds", True)),
    obs.CHUNKED_RUNS_STARTED: (("runs_started", False),),
    obs.RUNS_SUCCEEDED: (("runs_succeeded", False),),
    obs.RUNS_FAILED: (("runs_failed", False),),
    obs.RUNS_CANCELLED: (("runs_cancelled", False),),
    obs.RUNS_DEAD_LETTERED: (("runs_dead_lettered", False),),
    obs.LIMIT_WAITS: (("throttled_waits", False),),
}


def _tenant() -> str | None:
    tenant = obs.current_run_keys().get("tenant")
    return tenant if isinstance(tenant, str) and tenant else None


#: Counters billed outside the requests' units (:meth:`TenantMeter.record_billed`), kept per tenant
#: and shared by the same rule as the units; their names are the usage items'.
BILLED = ("sfn_transitions", "sns_publishes", "fargate_vcpu_seconds", "fargate_gb_seconds")


def _units() -> dict[str, float]:
    return {"wru": 0.0, "rru": 0.0, "sqs": 0.0, **dict.fromkeys(BILLED, 0.0)}


def billed_gb_seconds(seconds: float, memory_mb: int) -> float:
    """What Lambda bills for one invocation of ``seconds`` at ``memory_mb``: the duration rounded up to
    a whole millisecond, times the memory in GB (the rule of :mod:`jobsched.bench.pricing`)."""
    return math.ceil(max(0.0, seconds) * 1000 - 1e-9) / 1000 * (memory_mb / 1024)


class TenantMeter(Meter):
    """A :class:`Meter` that also keeps each request's units per tenant (decision 0059).

    A request made in a tenant's lane (:func:`jobsched.runtime.observability.current_lane`: the run a
    worker handles, the API caller's request, a backfill's tenant) is that tenant's: its units go to
    :attr:`by_tenant` and it weighs 1 for the tenant. A request made for no one tenant (a dispatcher's
    shard query, lease and job writes, a sweeper's scans, the event source mapping's receive and delete
    of a worker batch) goes to :attr:`shared`, and each item it returned or wrote that carries a
    ``tenant`` (a run, a job, ...) weighs 1 for that tenant. :meth:`settle`, once per invocation,
    splits the shared units and the invocation's Lambda duration and request charge over the tenants
    in proportion to their weights; an invocation that weighed no tenant (an idle tick) carries them
    to the container's next invocation that does.

    ``only`` (the deployment row, :data:`jobsched.core.usage.DEPLOYMENT`): every request and every
    billed amount is that tenant's, whatever lane or items it has (the capacity function serves no
    tenant: its cost is the deployment's).
    """

    def __init__(self, only: str | None = None) -> None:
        self.only = only
        self._tenant_lock = threading.Lock()
        self.by_tenant: defaultdict[str, dict[str, float]] = defaultdict(_units)
        self.shared: dict[str, float] = {**_units(), "gb_seconds": 0.0, "invocations": 0.0}
        self.weights: Counter[str] = Counter()
        #: What counting itself cost (the usage writes' units and seconds), since this meter was made.
        self.counting: dict[str, float] = {"wru": 0.0, "requests": 0.0, "gb_seconds": 0.0}
        self._quiet = threading.local()
        super().__init__()

    def _counting(self) -> bool:
        return bool(getattr(self._quiet, "depth", 0))

    @contextlib.contextmanager
    def not_attributed(self) -> Iterator[None]:
        """While active (this thread), requests are counted as counting's own cost, not a tenant's."""
        self._quiet.depth = getattr(self._quiet, "depth", 0) + 1
        try:
            yield
        finally:
            self._quiet.depth -= 1

    def _add(self, wru: float, rru: float, sqs: float, requests: int = 1) -> None:
        if self._counting():
            with self._tenant_lock:
                self.counting["wru"] += wru
                self.counting["requests"] += requests
            return
        tenant = self.only or obs.current_lane()
        with self._tenant_lock:
            units = self.by_tenant[tenant] if tenant else self.shared
            units["wru"] += wru
            units["rru"] += rru
            units["sqs"] += sqs
            if tenant:
                self.weights[tenant] += 1

    def record_dynamodb(self, operation: str, *, wcu: float = 0.0, rcu: float = 0.0, **kw: Any) -> None:
        super().record_dynamodb(operation, wcu=wcu, rcu=rcu, **kw)
        self._add(wcu, rcu, 0.0, kw.get("requests", 1))

    def record_sqs(self, operation: str, payload_bytes: Iterable[int]) -> None:
        sizes = list(payload_bytes)
        before = self.sqs_billed_requests
        super().record_sqs(operation, sizes)
        self._add(0.0, 0.0, self.sqs_billed_requests - before)

    def record_billed(self, counter: str, amount: float, *, tenant: str | None = None) -> None:
        """``amount`` of ``counter`` (one of :data:`BILLED`) for ``tenant``, else the lane's tenant (and
        it weighs 1 for that tenant, like a request made in its lane), else shared."""
        super().record_billed(counter, amount, tenant=tenant)
        if self._counting():
            return
        owner = self.only or tenant or obs.current_lane()
        with self._tenant_lock:
            units = self.by_tenant[owner] if owner else self.shared
            units[counter] = units.get(counter, 0.0) + amount
            if owner:
                self.weights[owner] += 1

    def record_items(self, wires: Iterable[Mapping[str, Any]]) -> None:
        if self.only or self._counting() or obs.current_lane():
            return  # a tenant's own request weighs 1 already
        tenants = [t["S"] for w in wires if isinstance(t := w.get("tenant"), dict) and t.get("S")]
        if tenants:
            with self._tenant_lock:
                self.weights.update(tenants)

    def record_event_source(self, body_bytes: Iterable[int], *, deleted: bool) -> None:
        """The event source mapping's requests for one worker batch, which the function never makes
        itself: the ``ReceiveMessage`` that returned the records (billed per started 64 KiB) and, when
        any record succeeded, the ``DeleteMessageBatch`` of those. Shared: split like the function's own
        requests for no one tenant. Not added to this meter's own request counts."""
        billed = max(1, math.ceil(sum(body_bytes) / (64 * 1024))) + (1 if deleted else 0)
        with self._tenant_lock:
            self.shared["sqs"] += billed

    def record_invocation(self, seconds: float, memory_mb: int) -> None:
        """One invocation of ``seconds`` at ``memory_mb``: its billed duration and request, shared."""
        with self._tenant_lock:
            self.shared["gb_seconds"] += billed_gb_seconds(seconds, memory_mb)
            self.shared["invocations"] += 1

    def record_counting_time(self, seconds: float, memory_mb: int) -> None:
        """Seconds an invocation spent writing its usage (after :meth:`settle`): shared with the next
        invocation's tenants, and counted as counting's own cost."""
        with self._tenant_lock:
            self.shared["gb_seconds"] += max(0.0, seconds) * (memory_mb / 1024)
            self.counting["gb_seconds"] += max(0.0, seconds) * (memory_mb / 1024)

    def take_tenant_units(self) -> dict[str, dict[str, float]]:
        """The units of the requests made in each tenant's lane since the last take (nothing shared)."""
        with self._tenant_lock:
            taken, self.by_tenant = dict(self.by_tenant), defaultdict(_units)
        return taken

    def settle(self) -> dict[str, dict[str, float]]:
        """Per tenant: its own units plus its share (weight / all weights) of the shared units, Lambda
        GB-seconds (``gb_seconds``) and invocations, since the last settle; keys ``wru``, ``rru``,
        ``sqs``, ``gb_seconds``, ``invocations`` and the :data:`BILLED` counters. With no weight at
        all, the shared figures are kept for the next settle (with ``only``: they are that tenant's)."""
        with self._tenant_lock:
            own, self.by_tenant = dict(self.by_tenant), defaultdict(_units)
            weights, self.weights = self.weights, Counter()
            if self.only and not weights:
                weights[self.only] = 1
            total = sum(weights.values())
            out: dict[str, dict[str, float]] = {}
            for tenant in set(own) | set(weights):
                units = {**_units(), "gb_seconds": 0.0, "invocations": 0.0, **own.get(tenant, {})}
                share = weights[tenant] / total if total else 0.0
                for name, value in self.shared.items():
                    units[name] += value * share
                out[tenant] = units
            if total:
                self.shared = dict.fromkeys(self.shared, 0.0)
        return out


class UsageRecorder:
    """A metric sink that counts usage per tenant and day, then passes each point on to ``inner``."""

    def __init__(self, inner: obs.MetricSink, clock: Clock, meter: Meter | None = None):
        self.inner = inner
        self.clock = clock
        self.meter = meter
        self._lock = threading.Lock()
        self._days: dict[tuple[str, str], DayUsage] = {}

    def _usage(self, tenant: str) -> DayUsage:
        day = day_of(self.clock.now())
        key = (tenant, day)
        if key not in self._days:
            self._days[key] = DayUsage(tenant=tenant, day=day)
        return self._days[key]

    def add(self, name: str, value: float = 1) -> None:
        counted = _COUNTED.get(name)
        tenant = _tenant() if counted else None
        if counted and tenant is not None:
            with self._lock:
                usage = self._usage(tenant)
                for counter, by_value in counted:
                    usage.add(counter, value if by_value else 1)
        self.inner.add(name, value)

    def add_to(self, tenant: str, counter: str, value: float) -> None:
        """Add ``value`` to ``counter`` of ``tenant``'s day (e.g. the deployment row's estimated empty
        polls), written with the next flush."""
        with self._lock:
            self._usage(tenant).add(counter, value)

    def take(self) -> list[DayUsage]:
        """What was counted since the last take (the meter's units and Lambda shares added, see
        :meth:`TenantMeter.settle`), and forget it."""
        units = self.meter.settle() if isinstance(self.meter, TenantMeter) else {}
        with self._lock:
            for tenant, spent in units.items():
                usage = self._usage(tenant)
                usage.add("wru", spent["wru"])
                usage.add("rru", spent["rru"])
                usage.add("sqs_requests", spent["sqs"])
                usage.add("lambda_gb_seconds", spent["gb_seconds"])
                usage.add("lambda_requests", spent["invocations"])
                for counter in BILLED:
                    usage.add(counter, spent.get(counter, 0.0))
            taken, self._days = list(self._days.values()), {}
        return [u for u in taken if not u.is_empty()]

    def flush(self, store: UsageRecords, *, seconds: float | None = None, memory_mb: int = 0) -> int:
        """Add what was counted to the usage items; the number of items written. ``seconds``: the
        invocation's duration so far, shared over its tenants at ``memory_mb`` (with a
        :class:`TenantMeter`). Each item written carries its own write's unit (an ``ADD`` to an item
        under 1 KB: 1 WRU); the seconds the writes take go to the next invocation's tenants. A failed
        write is logged and dropped (usage is an estimate; the run's own records are what is exact)."""
        meter = self.meter if isinstance(self.meter, TenantMeter) else None
        if meter is not None and seconds is not None:
            meter.record_invocation(seconds, memory_mb)
        started = time.perf_counter()
        written = 0
        with meter.not_attributed() if meter is not None else contextlib.nullcontext():
            for usage in self.take():
                if meter is not None:
                    usage.add("wru", 1.0)
                try:
                    store.add(usage)
                    written += 1
                except Exception:
                    logger.exception("could not add usage of tenant %s on %s", usage.tenant, usage.day)
        if meter is not None and seconds is not None:
            meter.record_counting_time(time.perf_counter() - started, memory_mb)
        return written


class FunctionUsage:
    """A function's usage counting across its container's invocations (decision 0059): the dispatcher,
    the sweeper and the API wrap each invocation in :meth:`invocation`, which times it and then adds
    what it did for each tenant (its meter's units and shares) to the usage items, one write per
    (tenant, day)."""

    def __init__(self, recorder: UsageRecorder, store: UsageRecords, memory_mb: int):
        self.recorder = recorder
        self.store = store
        self.memory_mb = memory_mb

    @contextlib.contextmanager
    def invocation(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.recorder.flush(self.store, seconds=time.perf_counter() - started, memory_mb=self.memory_mb)


class MappingPolls:
    """The event source mappings' empty polls, a cost of the deployment (decision 0059 amended): the
    sweeper adds, once per sweep, what ``mappings`` idle mappings poll in the time since its previous
    sweep in this container (the first sweep: ``period_seconds``, the sweeper's schedule; at most
    ``cap_seconds``) to the deployment row's ``sqs_requests``. An estimate: a poll that returned runs
    was counted for their tenants already, and is counted here again."""

    def __init__(self, mappings: int, period_seconds: float, cap_seconds: float = 3600.0):
        self.mappings = mappings
        self.period_seconds = period_seconds
        self.cap_seconds = cap_seconds
        self.last: datetime | None = None

    def since_last(self, now: datetime) -> float:
        """Empty polls since the previous call (see the class docstring), and remember ``now``."""
        elapsed = self.period_seconds if self.last is None else (now - self.last).total_seconds()
        self.last = now
        return empty_polls(self.mappings, min(max(0.0, elapsed), self.cap_seconds))

    def add_to(self, recorder: UsageRecorder, now: datetime) -> float:
        """Add the empty polls since the previous sweep to the deployment row (with the next flush)."""
        polls = self.since_last(now)
        if polls:
            recorder.add_to(DEPLOYMENT, "sqs_requests", polls)
        return polls
