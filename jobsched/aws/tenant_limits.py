"""Per-tenant limits set by an operator (``lease_key = "limits#<tenant>"`` in the Leases table).

An item holds ``max_running`` (the tenant's concurrent runs) and/or ``per_second`` + ``burst`` (the
tenant's runs started per second); no item, or an absent attribute, means the deployment's default
(``JOBSCHED_TENANT_MAX_RUNNING``, ``JOBSCHED_TENANT_RUNS_PER_SECOND``; 0 = no limit). Workers read a
tenant's item at most once a minute per container (:class:`TenantLimits` keeps what it read in a
:class:`LimitsCache`; the worker function passes :data:`CONTAINER_CACHE`, which lives as long as its
container, not one invocation), so a change takes effect within about a minute; the admin API's
writes go to the item directly, and forget the tenant in :data:`CONTAINER_CACHE` too, so that in the
embedded mode, where the API and the workers share one process, a change applies at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from jobsched.aws.metering import ConditionFailed
from jobsched.core.errors import NotFoundError
from jobsched.core.limits import RateSpec
from jobsched.core.models import to_iso
from jobsched.ports.tables import Table

PREFIX = "limits#"
_V = TypeVar("_V")
#: The key of a tenant's own semaphore and bucket (:func:`jobsched.aws.limits_store.semaphore_key`).
TENANT_SCOPE = None


@dataclass(frozen=True)
class TenantLimit:
    """A tenant's effective limits: ``max_running`` (None: none) and ``rate`` (None: none); ``source``
    says where each came from (``tenant`` or ``default``)."""

    tenant: str
    max_running: int | None
    rate: RateSpec | None
    source: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "max_running": self.max_running,
            "runs_per_second": self.rate.per_second if self.rate else None,
            "burst": self.rate.burst if self.rate else None,
            "source": dict(self.source),
        }


class TenantCache(Generic[_V]):
    """Values per tenant as read, with the monotonic time of the read (thread-safe)."""

    MAX_TENANTS = 10_000

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, _V]] = {}
        self._lock = threading.Lock()

    def fresh(self, tenant: str, now: float, max_age: float) -> _V | None:
        """The tenant's value if read less than ``max_age`` seconds before ``now``."""
        with self._lock:
            entry = self._entries.get(tenant)
        return entry[1] if entry is not None and now - entry[0] < max_age else None

    def keep(self, tenant: str, now: float, value: _V) -> None:
        with self._lock:
            if len(self._entries) >= self.MAX_TENANTS:
                self._entries.clear()
            self._entries[tenant] = (now, value)

    def forget(self, tenant: str | None = None) -> None:
        """Drop the tenant's entry (every entry when ``tenant`` is None)."""
        with self._lock:
            if tenant is None:
                self._entries.clear()
            else:
                self._entries.pop(tenant, None)


class LimitsCache(TenantCache[TenantLimit]):
    """Tenants' effective limits as read, with the monotonic time of the read (thread-safe)."""


#: The cache of a container (the worker function's, for all its invocations; see the module docstring).
CONTAINER_CACHE = LimitsCache()


class TenantLimits:
    """Reads (cached) and writes the operator's per-tenant limits."""

    def __init__(
        self,
        dynamo: Table,
        table: str,
        *,
        default_max_running: int = 0,
        default_per_second: float = 0.0,
        default_burst: int = 1,
        cache_seconds: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
        cache: LimitsCache | None = None,
    ):
        self.dynamo = dynamo
        self.table = table
        self.default_max_running = default_max_running
        self.default_per_second = default_per_second
        self.default_burst = default_burst
        self.cache_seconds = cache_seconds
        self.monotonic = monotonic
        #: What was read; a new one per instance unless given (:data:`CONTAINER_CACHE`).
        self.cache = cache if cache is not None else LimitsCache()

    def effective(self, tenant: str) -> TenantLimit:
        """The tenant's limits, its own where set, else the deployment's defaults (cached)."""
        now = self.monotonic()
        cached = self.cache.fresh(tenant, now, self.cache_seconds)
        if cached is not None:
            return cached
        item = self.dynamo.get(self.table, {"lease_key": PREFIX + tenant}) or {}
        limit = self._merge(tenant, item)
        self.cache.keep(tenant, now, limit)
        return limit

    def _forget(self, tenant: str) -> None:
        self.cache.forget(tenant)
        CONTAINER_CACHE.forget(tenant)

    def _merge(self, tenant: str, item: dict[str, Any]) -> TenantLimit:
        source: dict[str, str] = {}
        running = item.get("max_running")
        if running is not None:
            source["max_running"] = "tenant"
        else:
            running = self.default_max_running or None
            source["max_running"] = "default"
        per_second, burst = item.get("per_second"), item.get("burst")
        if per_second is not None:
            source["runs_per_second"] = "tenant"
        else:
            per_second, burst = self.default_per_second or None, self.default_burst
            source["runs_per_second"] = "default"
        rate = (
            RateSpec(key="@tenant", per_second=float(per_second), burst=int(burst or 1))
            if per_second
            else None
        )
        return TenantLimit(tenant, int(running) if running else None, rate, source)

    def put(
        self,
        tenant: str,
        now: datetime,
        *,
        max_running: int | None,
        per_second: float | None,
        burst: int | None,
    ) -> TenantLimit:
        """Set the tenant's own limits (None: the deployment default for that one)."""
        item: dict[str, Any] = {"lease_key": PREFIX + tenant, "tenant": tenant, "updated_at": to_iso(now)}
        if max_running is not None:
            item["max_running"] = max_running
        if per_second is not None:
            item["per_second"] = per_second
            item["burst"] = burst or 1
        self.dynamo.put(self.table, item)
        self._forget(tenant)
        return self._merge(tenant, item)

    def delete(self, tenant: str) -> None:
        """Back to the deployment's defaults; :class:`NotFoundError` if the tenant had no limits set."""
        self._forget(tenant)
        try:
            self.dynamo.delete(
                self.table, {"lease_key": PREFIX + tenant}, condition="attribute_exists(lease_key)"
            )
        except ConditionFailed:
            raise NotFoundError(f"tenant {tenant} has no limits of its own") from None

    def get(self, tenant: str) -> TenantLimit:
        """The tenant's limits, read now (no cache: the admin view)."""
        return self._merge(tenant, self.dynamo.get(self.table, {"lease_key": PREFIX + tenant}) or {})

    def list(self) -> list[TenantLimit]:
        """Every tenant with limits of its own, by tenant (an operator's view; a small set)."""
        items = [
            i for i in self.dynamo.scan_all(self.table) if str(i.get("lease_key", "")).startswith(PREFIX)
        ]
        return sorted((self._merge(i["tenant"], i) for i in items), key=lambda t: t.tenant)
