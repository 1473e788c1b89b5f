"""Capacity plans: what each queue's ceiling and the worker's warm capacity should be now. Pure
(decision 0055).

Once a minute the capacity service (:mod:`jobsched.services.capacity`) reads the forecast's needs per
queue kind (:func:`jobsched.core.forecast.pool_needs`), the age of each queue's oldest due run and the
current capacity, and applies :func:`plan`:

* **pre-warming**: the ceiling is at least the largest need in the next ``lead_minutes`` (a peak is
  met by capacity raised ``lead_minutes`` before it, not after); provisioned concurrency (warm
  instances, ``lambda`` pool only) is the largest need of the worker's queues in that window, so it is
  released once no peak is that close. Needs are runs at once; a ceiling counts invocations (each
  runs a batch of up to ``runs_per_unit`` records together) or container tasks;
* **scaling on age**: while a queue's oldest due run is older than ``age_threshold_seconds`` the
  ceiling doubles from where it is (one step a minute) up to the cap; while runs are still waiting
  (any age) it is held; once drained (no waiting run) it falls back to what the forecast asks;
* every value stays within ``[base, cap]``: ``base`` is the deployment's configured ceiling (never
  lowered below it), ``cap`` its context setting (``base`` by default: no raise). A mapping's
  ``MaximumConcurrency`` is 2..1000 (Lambda's range).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jobsched.core.pools import CONTAINER_QUEUE

#: Lambda's range for an event source mapping's ``ScalingConfig.MaximumConcurrency``.
MIN_MAPPING_CONCURRENCY = 2
MAX_MAPPING_CONCURRENCY = 1000


@dataclass(frozen=True)
class QueueCaps:
    """One queue kind's bounds: ``base`` (its configured ceiling) and ``cap`` (the most it is raised
    to); the container queue's are ECS task counts."""

    base: int
    cap: int

    def clamp(self, value: int) -> int:
        return max(self.base, min(self.cap, value))


@dataclass(frozen=True)
class CapacityPolicy:
    """The caps and thresholds (context settings, docs/deploy.md)."""

    queues: Mapping[str, QueueCaps]
    #: the most provisioned concurrency on the worker's alias (0: never provisioned)
    provisioned_cap: int = 0
    #: how far ahead a peak raises capacity (provisioned concurrency takes minutes to be ready)
    lead_minutes: int = 10
    #: a queue whose oldest due run is older than this has its ceiling raised
    age_threshold_seconds: float = 60.0
    #: the queue kinds whose needs provisioned concurrency serves (the worker function's queues)
    provisioned_queues: tuple[str, ...] = ("default", "low")
    #: runs one unit of a queue's ceiling handles at once: a Lambda invocation takes a batch of up to
    #: the mapping's batch size (10; ``long``: 1) and runs its records together; a container task runs
    #: its ``--concurrency`` (1). A kind not named: 1.
    runs_per_unit: Mapping[str, int] = field(default_factory=dict)

    def units(self, kind: str, runs: int) -> int:
        """The ceiling units (invocations, tasks) that run ``runs`` at once on ``kind``."""
        per = max(1, self.runs_per_unit.get(kind, 1))
        return -(-runs // per)


@dataclass(frozen=True)
class Plan:
    """Targets: a ceiling per queue kind, the provisioned concurrency, and why each was chosen."""

    ceilings: dict[str, int]
    provisioned: int
    reasons: dict[str, str] = field(default_factory=dict)


def plan(
    policy: CapacityPolicy,
    needs: Mapping[str, list[int]],
    ages: Mapping[str, float],
    current: Mapping[str, int],
) -> Plan:
    """The targets for this minute. ``needs``: per queue kind, the runs each coming minute needs at once
    (minute 0 = now; :meth:`CapacityPolicy.units` turns them into ceiling units); ``ages``: per queue
    kind, seconds since its oldest waiting run was due (absent or 0: nothing waits); ``current``: each
    queue's ceiling now."""
    ceilings: dict[str, int] = {}
    reasons: dict[str, str] = {}
    for kind, caps in policy.queues.items():
        ahead = policy.units(
            kind, max((_at(needs.get(kind, []), i) for i in range(policy.lead_minutes + 1)), default=0)
        )
        now = current.get(kind, caps.base)
        age = ages.get(kind, 0.0)
        target, reason = caps.clamp(ahead), "forecast" if ahead > caps.base else "base"
        if age > policy.age_threshold_seconds:
            raised = caps.clamp(max(target, now * 2, now + 1))
            target, reason = raised, f"age {age:.0f} s > {policy.age_threshold_seconds:.0f} s"
        elif age > 0 and now > target:
            target, reason = caps.clamp(now), "draining"
        if kind != CONTAINER_QUEUE:
            target = max(MIN_MAPPING_CONCURRENCY, min(MAX_MAPPING_CONCURRENCY, target))
        ceilings[kind] = target
        reasons[kind] = reason
    warm = max(
        (
            sum(policy.units(k, _at(needs.get(k, []), i)) for k in policy.provisioned_queues)
            for i in range(policy.lead_minutes + 1)
        ),
        default=0,
    )
    provisioned = min(policy.provisioned_cap, warm)
    return Plan(ceilings=ceilings, provisioned=provisioned, reasons=reasons)


def _at(row: list[int], i: int) -> int:
    return row[i] if i < len(row) else 0
