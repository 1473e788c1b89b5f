"""An in-memory :class:`~jobsched.ports.capacity.PoolCapacity` with the real calls' semantics.

A mapping's ceiling is refused outside 2..1000 (Lambda's ``InvalidParameterValueException``), a
container desired count below 0 (ECS's ``InvalidParameterException``), a provisioned concurrency below
0; ``set_provisioned(0)`` deletes the configuration. Every change is recorded in ``changes`` (what
the tests assert on).
"""

from __future__ import annotations

from jobsched.core.capacity import MAX_MAPPING_CONCURRENCY, MIN_MAPPING_CONCURRENCY
from jobsched.core.pools import CONTAINER_QUEUE
from jobsched.ports.capacity import CapacityRefused


class InMemoryCapacity:
    """Ceilings per queue kind (the container kind a desired count) and one provisioned concurrency."""

    def __init__(self, ceilings: dict[str, int], provisioned: int = 0):
        self._ceilings = dict(ceilings)
        self._provisioned = provisioned
        self.changes: list[tuple[str, int]] = []

    def kinds(self) -> tuple[str, ...]:
        return tuple(self._ceilings)

    def ceiling(self, kind: str) -> int | None:
        return self._ceilings.get(kind)

    def set_ceiling(self, kind: str, value: int) -> None:
        if kind not in self._ceilings:
            raise KeyError(kind)
        low, high = (
            (0, None) if kind == CONTAINER_QUEUE else (MIN_MAPPING_CONCURRENCY, MAX_MAPPING_CONCURRENCY)
        )
        if value < low or (high is not None and value > high):
            raise CapacityRefused(f"{kind} ceiling {value} is outside {low}..{high or 'any'}")
        self._ceilings[kind] = value
        self.changes.append((kind, value))

    def provisioned(self) -> int:
        return self._provisioned

    def set_provisioned(self, value: int) -> None:
        if value < 0:
            raise CapacityRefused(f"provisioned concurrency {value} is below 0")
        self._provisioned = value
        self.changes.append(("provisioned", value))
