"""The capacity a pool has now, and the calls that raise or lower it (decision 0055).

A *ceiling* per queue kind: on Lambda an event source mapping's ``ScalingConfig.MaximumConcurrency``
(2..1000; outside that range the call is refused); on the container pool the ECS service's desired
count (0 or more). *Provisioned concurrency* on the worker's alias: ``set_provisioned(n)`` with
``n >= 1`` asks for n warm instances (``provisioned()`` answers what was asked), ``0`` deletes the
configuration. A queue kind the deployment does not wire answers ``None`` and cannot be set
(:class:`KeyError`). :mod:`jobsched.aws.capacity` is the real implementation,
:class:`jobsched.testing.capacity.InMemoryCapacity` the fake; tests/contract holds both to this.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from jobsched.core.forecast import JobView, Queued


class CapacityRefused(ValueError):
    """Raised when Lambda or ECS refuses a value (a ceiling outside its range, a negative count)."""


class PoolCapacity(Protocol):
    """Reads and sets each queue's ceiling and the worker alias's provisioned concurrency."""

    def kinds(self) -> tuple[str, ...]: ...  # the queue kinds whose ceiling can be read and set

    def ceiling(self, kind: str) -> int | None: ...

    def set_ceiling(self, kind: str, value: int) -> None: ...

    def provisioned(self) -> int: ...

    def set_provisioned(self, value: int) -> None: ...


class ForecastSource(Protocol):
    """What the forecast reads (:mod:`jobsched.aws.forecast_reads`): the due index's jobs whose cursor
    is before ``until`` and the runs the in-flight ledger names as queued ahead, optionally of one
    tenant; each with its pool and priority (decision 0054)."""

    def jobs_due(self, until: datetime, now: datetime, tenant: str | None = None) -> list[JobView]: ...

    def queued_ahead(self, now: datetime, until: datetime, tenant: str | None = None) -> list[Queued]: ...
