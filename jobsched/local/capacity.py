"""The capacity service in the embedded mode (decision 0055): the pollers' worker slots are the ceilings.

On AWS a Lambda queue's ceiling is its event source mapping's ``MaximumConcurrency``; here it is the
queue's poller's slots (:meth:`jobsched.local.pollers.QueuePoller.resize`), so the same
:class:`~jobsched.services.capacity.CapacityService` raises them before a forecast peak and on age,
and lowers them after, once a minute (``LocalConfig.capacity_seconds``), when ``jobsched dev
--capacity-max-slots`` gives it room (over 0; else it is not run). Provisioned concurrency has no
equivalent: the functions run in this process and are always warm, so :class:`PollerCapacity` keeps
the value asked (what ``provisioned()`` answers) and changes nothing. The container pool's worker is
a child process with a fixed ``--concurrency``: its queue is not among the kinds here. The two
per-pool metrics go nowhere here (CloudWatch's); what the service changes is printed with the run
events (``capacity: default 20 -> 40 (forecast)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jobsched.aws.clients import Clients
from jobsched.compose.pipeline import capacity_service_from_settings
from jobsched.core.capacity import CapacityPolicy, QueueCaps
from jobsched.local.pollers import QueuePoller
from jobsched.ports.capacity import CapacityRefused
from jobsched.runtime import observability as obs
from jobsched.runtime.clock import SystemClock
from jobsched.runtime.settings import Settings


class PollerCapacity:
    """:class:`~jobsched.ports.capacity.PoolCapacity` over the embedded mode's pollers, by queue kind."""

    def __init__(self, pollers: Mapping[str, QueuePoller]):
        self.pollers = dict(pollers)
        self._provisioned = 0

    def kinds(self) -> tuple[str, ...]:
        return tuple(self.pollers)

    def ceiling(self, kind: str) -> int | None:
        poller = self.pollers.get(kind)
        return poller.slots if poller is not None else None

    def set_ceiling(self, kind: str, value: int) -> None:
        try:
            self.pollers[kind].resize(value)
        except ValueError as exc:
            raise CapacityRefused(str(exc)) from exc

    def provisioned(self) -> int:
        return self._provisioned

    def set_provisioned(self, value: int) -> None:
        if value < 0:
            raise CapacityRefused(f"provisioned concurrency {value} is below 0")
        self._provisioned = value  # in-process functions are always warm: nothing to provision


def local_policy(slots: Mapping[str, int], batch_sizes: Mapping[str, int], max_slots: int) -> CapacityPolicy:
    """Each queue's configured slots as its base, ``max_slots`` (if larger) as its cap."""
    return CapacityPolicy(
        queues={kind: QueueCaps(base, max(base, max_slots)) for kind, base in slots.items()},
        runs_per_unit=dict(batch_sizes),
        provisioned_queues=(),
    )


def capacity_tick(
    environ: Mapping[str, str],
    pollers: Mapping[str, QueuePoller],
    policy: CapacityPolicy,
    metrics: obs.MetricSink,
    out: Callable[[str], None] = print,
    ceiling_lease_seconds: float | None = None,
) -> Callable[[dict[str, Any]], Any]:
    """The embedded mode's capacity schedule: one capacity service, built on its first tick from the
        functions' environment (the emulator's endpoint), ticked by the wall clock; each change it makes
        is a line on ``out`` (``capacity: low 2 -> 3 (forecast)``). With fair shares it writes the pool
    ceiling items the workers' share gate reads, as on AWS, in force ``ceiling_lease_seconds``."""
    service: list[Any] = []
    clock = SystemClock()

    def tick(_event: dict[str, Any]) -> dict[str, Any]:
        if not service:
            settings = Settings.from_env(environ)
            service.append(
                capacity_service_from_settings(
                    settings,
                    Clients(),
                    PollerCapacity(pollers),
                    policy,
                    metrics=metrics,
                    ceiling_lease_seconds=ceiling_lease_seconds,
                )
            )
        report = service[0].tick(clock.now())
        for kind, (before, after) in report.changed.items():
            reason = report.plan.reasons.get(kind, "forecast")
            out(f"capacity: {kind} {before} -> {after} ({reason})")
        for kind, why in report.refused.items():
            out(f"capacity: {kind} not changed: {why}")
        return {"changed": {k: list(v) for k, v in report.changed.items()}, "refused": report.refused}

    return tick
