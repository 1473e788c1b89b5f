"""The capacity service: once a minute, pre-warm before forecast peaks and scale on age (decision 0055).

:meth:`CapacityService.tick` reads the forecast (:class:`~jobsched.services.forecast.ForecastService`),
the age of each queue's oldest due run (the sweeper's measurement, :mod:`jobsched.aws.queue_ages`) and
the current capacity (:class:`~jobsched.ports.capacity.PoolCapacity`), plans with
:func:`jobsched.core.capacity.plan` and changes only what differs. It emits, per pool,
``ForecastConcurrency<Pool>`` (the concurrency the busiest coming minute needs) and
``PoolCapacity<Pool>`` (the ceiling after the tick). A value a service refuses is logged and left; the
other queues are still set. On AWS it is the ``Capacity`` function on a one-minute schedule; in the
embedded mode the housekeeping loop runs it against the pollers' concurrency (docs/scaling.md).

With fair shares (decision 0057) it also tells the workers each shared pool's ceiling, so a tenant's
slots follow it: given ``ceilings`` and the ``shared`` kinds, it writes a kind's ceiling item when it
changes the ceiling -- before lowering the mapping, after raising it, so a tenant's slots never exceed
what the ceiling in force leaves of the head-room -- and renews it at every tick while the ceiling is
above the base. A write that fails is logged; the ceiling stays as set (a tenant's slots stay what
the item said, or the base once it lapses).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from jobsched.core.capacity import CapacityPolicy, Plan, plan
from jobsched.core.forecast import WINDOW_MINUTES
from jobsched.core.pools import CONTAINER_POOL, LONG_POOL, POOLS, queue_for
from jobsched.ports.capacity import CapacityRefused, PoolCapacity
from jobsched.ports.stores import PoolCeilings
from jobsched.runtime import observability as obs
from jobsched.runtime.resources import PRIORITIES
from jobsched.services.forecast import ForecastService

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CapacityConfig:
    policy: CapacityPolicy


@dataclass
class CapacityReport:
    """What one tick saw and did: the plan, the changes made and the refusals."""

    plan: Plan
    changed: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def _pool_kinds(pool: str) -> tuple[str, ...]:
    if pool in (LONG_POOL, CONTAINER_POOL):
        return (queue_for(pool, "default"),)
    return tuple(queue_for(pool, p) for p in PRIORITIES)


class CapacityService:
    """Raises and lowers each pool's ceiling and the worker's provisioned concurrency."""

    def __init__(
        self,
        config: CapacityConfig,
        forecasts: ForecastService,
        capacity: PoolCapacity,
        ages: Callable[[], Mapping[str, datetime]],
        metrics: obs.MetricSink,
        *,
        ceilings: PoolCeilings | None = None,
        shared: Collection[str] = (),
    ):
        self.config = config
        self.forecasts = forecasts
        self.capacity = capacity
        self.ages = ages
        self.metrics = metrics
        self.ceilings = ceilings
        self.shared = frozenset(shared) if ceilings is not None else frozenset()

    def _record(self, kind: str, ceiling: int, now: datetime, *, changed: bool) -> None:
        if self.ceilings is None or kind not in self.shared:
            return
        try:
            self.ceilings.record(kind, ceiling, now, changed=changed)
        except Exception:  # the ceiling stands; the tenants' slots stay what the item said (or lapse)
            logger.exception("the ceiling item of %s (%d) was not written", kind, ceiling)

    def tick(self, now: datetime) -> CapacityReport:
        forecast = self.forecasts.forecast(now)
        needs = self.forecasts.needs(forecast)
        try:
            oldest = self.ages()
        except Exception as exc:  # the ages item unreadable: plan on the forecast alone
            logger.warning("queue ages unreadable, planning on the forecast alone: %s", exc)
            oldest = {}
        ages = {kind: max(0.0, (now - due).total_seconds()) for kind, due in oldest.items()}
        kinds = [k for k in self.capacity.kinds() if k in self.config.policy.queues]
        current = {k: v for k in kinds if (v := self.capacity.ceiling(k)) is not None}
        policy = self.config.policy
        chosen = plan(
            replace(policy, queues={k: policy.queues[k] for k in kinds}),
            needs,
            ages,
            current,
        )
        report = CapacityReport(plan=chosen)
        for kind, target in chosen.ceilings.items():
            before = current.get(kind)
            if before == target:
                if target > policy.queues[kind].base:
                    self._record(kind, target, now, changed=False)  # renewed while raised
                continue
            lowering = before is not None and target < before
            if lowering:  # the tenants' slots come down first, then the mapping
                self._record(kind, target, now, changed=True)
            try:
                self.capacity.set_ceiling(kind, target)
            except CapacityRefused as exc:
                report.refused[kind] = str(exc)
                logger.warning("capacity of %s not set to %d: %s", kind, target, exc)
                if lowering and before is not None:
                    self._record(kind, before, now, changed=True)  # the mapping kept its ceiling
                continue
            if not lowering:
                self._record(kind, target, now, changed=True)
            report.changed[kind] = (before, target)
            current[kind] = target
            logger.info(
                "capacity of %s %s -> %d (%s)", kind, report.changed[kind][0], target, chosen.reasons[kind]
            )
        warm = self.capacity.provisioned()
        if warm != chosen.provisioned:
            try:
                self.capacity.set_provisioned(chosen.provisioned)
                report.changed["provisioned"] = (warm, chosen.provisioned)
                logger.info("provisioned concurrency %d -> %d", warm, chosen.provisioned)
            except CapacityRefused as exc:
                report.refused["provisioned"] = str(exc)
                logger.warning("provisioned concurrency not set to %d: %s", chosen.provisioned, exc)
        for pool in POOLS:
            pool_kinds = _pool_kinds(pool)
            busiest = max(sum(_at(needs.get(k, []), i) for k in pool_kinds) for i in range(WINDOW_MINUTES))
            self.metrics.add(obs.pool_metric(obs.FORECAST_CONCURRENCY, pool), float(busiest))
            ceiling = sum(current.get(k, 0) for k in pool_kinds)
            self.metrics.add(obs.pool_metric(obs.POOL_CAPACITY, pool), float(ceiling))
        return report


def _at(row: list[int], i: int) -> int:
    return row[i] if i < len(row) else 0
