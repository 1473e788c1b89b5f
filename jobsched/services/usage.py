"""Counting usage per tenant and day in the worker (docs/semantics/limits.md, "Usage").

:class:`UsageRecorder` is a metric sink in front of the worker's own: every metric the worker and the
limit gate emit while a run is handled is also counted for the run's tenant (read from the run's log
keys, :func:`jobsched.runtime.observability.current_run_keys`, bound for every thread of the run):

* ``RunDuration`` (one per attempt executed): ``runs_started`` + 1, ``run_seconds`` + its value;
  ``ChunkedRunsStarted`` (a chunked run handed to a new execution): ``runs_started`` + 1;
* the ending of each started attempt, exactly one of ``RunsSucceeded``, ``RunsFailed`` (retried,
  dead-lettered or lost to a takeover) and ``RunsCancelled``, so started = succeeded + failed +
  cancelled; ``RunsDeadLettered``, ``LimitWaits`` (``throttled_waits``).

:class:`TenantMeter` is the worker's request meter that also keeps the units per tenant. At the end
of the invocation :meth:`UsageRecorder.flush` adds each (tenant, day) to its usage item: one write
per tenant and day the invocation touched, and nothing when it handled no run. Metric names carry
no tenant dimension: the per-tenant figures live in DynamoDB, not in CloudWatch metrics.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from jobsched.aws.metering import Meter
from jobsched.core.clock import Clock
from jobsched.core.usage import DayUsage, day_of
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


class TenantMeter(Meter):
    """A :class:`Meter` that also adds each request's units to the tenant of the run being handled."""

    def __init__(self) -> None:
        self._tenant_lock = threading.Lock()
        self.by_tenant: defaultdict[str, dict[str, float]] = defaultdict(
            lambda: {"wru": 0.0, "rru": 0.0, "sqs": 0.0}
        )
        super().__init__()

    def record_dynamodb(self, operation: str, *, wcu: float = 0.0, rcu: float = 0.0, **kw: Any) -> None:
        super().record_dynamodb(operation, wcu=wcu, rcu=rcu, **kw)
        if (tenant := _tenant()) is not None:
            with self._tenant_lock:
                self.by_tenant[tenant]["wru"] += wcu
                self.by_tenant[tenant]["rru"] += rcu

    def record_sqs(self, operation: str, payload_bytes: Iterable[int]) -> None:
        sizes = list(payload_bytes)
        before = self.sqs_billed_requests
        super().record_sqs(operation, sizes)
        if (tenant := _tenant()) is not None:
            with self._tenant_lock:
                self.by_tenant[tenant]["sqs"] += self.sqs_billed_requests - before

    def take_tenant_units(self) -> dict[str, dict[str, float]]:
        with self._tenant_lock:
            taken, self.by_tenant = (
                dict(self.by_tenant),
                defaultdict(lambda: {"wru": 0.0, "rru": 0.0, "sqs": 0.0}),
            )
        return taken


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

    def take(self) -> list[DayUsage]:
        """What was counted since the last take (units from the meter added), and forget it."""
        units = self.meter.take_tenant_units() if isinstance(self.meter, TenantMeter) else {}
        with self._lock:
            for tenant, spent in units.items():
                usage = self._usage(tenant)
                usage.add("wru", spent["wru"])
                usage.add("rru", spent["rru"])
                usage.add("sqs_requests", int(spent["sqs"]))
            taken, self._days = list(self._days.values()), {}
        return [u for u in taken if not u.is_empty()]

    def flush(self, store: UsageRecords) -> int:
        """Add what was counted to the usage items; the number of items written. A failed write is
        logged and dropped (usage is an estimate; the run's own records are what is exact)."""
        written = 0
        for usage in self.take():
            try:
                store.add(usage)
                written += 1
            except Exception:
                logger.exception("could not add usage of tenant %s on %s", usage.tenant, usage.day)
        return written
