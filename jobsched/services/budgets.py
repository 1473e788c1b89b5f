"""Spend caps per tenant (docs/semantics/limits.md, "Spend caps"; decision 0062).

:class:`BudgetService` sets, clears and reads a tenant's monthly budget and measures the month-to-date
spend against it: the sum of the tenant's usage items' ``estimated_usd`` from the first day of the
UTC month to today, read through the usage port (:class:`jobsched.ports.stores.UsageRecords`), so
whatever the usage items count flows into the check unchanged.

:class:`BudgetGate` is the dispatcher's view: a tenant's status read at most once per ``ttl_seconds``
per gate, counted on the dispatch's own instants (one ``GetItem`` of the budget item, and only for a
tenant that has a budget one ``BatchGetItem`` of the month's usage items), so a due job costs a
dictionary lookup; the dispatcher function builds its gate once per container. A set or clear
through the API forgets the tenant in every gate of the process (:func:`forget_cached`), so in the
embedded mode, where the API and the dispatcher share one process, a change applies at the next tick.

:class:`BudgetWarnings` notifies a tenant's owners once per month when its spend reaches 80 %: a
marker item per (tenant, month) in the Runs table (partition ``budget#<tenant>``, sort key the
month), written with a conditional put, carries the outbox mark of the dead-letter notifier
(:mod:`jobsched.services.notifications`), which sends it to the tenant's default ``notify``
(``PUT /settings/notify``). The first writer delivers; a delivery left owed (a failed try) is
retried by the next refresh of that tenant's status (one per ``ttl_seconds``) while it is pending.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from jobsched.aws.attempts import NOTIFY_PENDING
from jobsched.aws.budget_store import BudgetStore
from jobsched.aws.metering import ConditionFailed
from jobsched.aws.tenant_limits import TenantCache
from jobsched.core.budgets import (
    BudgetStatus,
    exhausted_message,
    marker_key,
    month_of,
    month_to_date,
    validate_budget,
)
from jobsched.core.errors import BudgetExhaustedError
from jobsched.core.models import to_iso
from jobsched.ports.stores import UsageRecords
from jobsched.ports.tables import Table

logger = logging.getLogger(__name__)

#: How long the dispatcher trusts a tenant's status before reading it again.
DEFAULT_TTL_SECONDS = 60.0
#: How long a warning marker is kept (it only has to outlive its month).
MARKER_TTL = timedelta(days=62)
#: How long the dispatcher keeps the sum of a tenant's days before today (a worker invocation that
#: ends just after midnight still adds to the day it counted on).
PAST_DAYS_TTL = timedelta(hours=1)


class BudgetService:
    """A tenant's budget and spend; set and cleared by an administrator."""

    def __init__(
        self,
        budgets: BudgetStore,
        usage: UsageRecords,
        *,
        memory_mb: int,
        on_change: Callable[[str], None] | None = None,
    ):
        self.budgets = budgets
        self.usage = usage
        #: The worker's memory, which prices a run's GB-seconds in ``estimated_usd`` (as ``GET /usage``).
        self.memory_mb = memory_mb
        #: Called with the tenant after a set or clear (forgets what the gates cached).
        self.on_change = on_change or forget_cached
        #: tenant -> (today, when read, the spend of the month's days before today): the dispatcher's.
        self._past: dict[str, tuple[str, datetime, float]] = {}

    def spent(self, tenant: str, now: datetime, *, cached_past: bool = False) -> float:
        """The tenant's month-to-date ``estimated_usd`` (UTC month). ``cached_past`` (the
        dispatcher's): the days before today are read at most once per :data:`PAST_DAYS_TTL` and
        today's item every call, so a read costs one key, not one per day of the month."""
        first, last = month_to_date(now)
        if not cached_past or first == last:
            return self._sum(tenant, first, last)
        today = last.isoformat()
        entry = self._past.get(tenant)
        if entry is None or entry[0] != today or not timedelta(0) <= now - entry[1] < PAST_DAYS_TTL:
            if len(self._past) >= BudgetCache.MAX_TENANTS:
                self._past.clear()
            entry = (today, now, self._sum(tenant, first, last - timedelta(days=1)))
            self._past[tenant] = entry
        return entry[2] + self._sum(tenant, last, last)

    def _sum(self, tenant: str, first: date, last: date) -> float:
        return sum(day.estimated_usd(self.memory_mb) for day in self.usage.tenant_days(tenant, first, last))

    def status(self, tenant: str, now: datetime, *, dispatch: bool = False) -> BudgetStatus:
        """The tenant's budget and month-to-date spend. ``dispatch`` (the dispatcher's gate): a tenant
        with no budget costs one read, its spend not read (answered 0); with a budget, the days before
        today come from :meth:`spent`'s hourly sum."""
        budget = self.budgets.get(tenant)
        if budget is None and dispatch:
            return BudgetStatus(tenant, month_of(now), None, 0.0)
        return BudgetStatus(tenant, month_of(now), budget, self.spent(tenant, now, cached_past=dispatch))

    def set(self, tenant: str, monthly_usd: Any, now: datetime) -> BudgetStatus:
        """Set (or replace) the tenant's monthly budget; :class:`ValidationError` unless positive USD."""
        amount = validate_budget(monthly_usd)
        self.budgets.put(tenant, amount, now)
        self.on_change(tenant)
        return BudgetStatus(tenant, month_of(now), amount, self.spent(tenant, now))

    def clear(self, tenant: str) -> None:
        """Remove the tenant's budget (no cap); :class:`NotFoundError` if it had none."""
        try:
            self.budgets.delete(tenant)
        finally:
            self.on_change(tenant)

    def list(self, now: datetime) -> list[BudgetStatus]:
        """Every tenant with a budget, by tenant, with its spend (one Scan of the month's usage)."""
        budgets = self.budgets.list()
        if not budgets:
            return []
        first, last = month_to_date(now)
        spent: dict[str, float] = dict.fromkeys(budgets, 0.0)
        for day in self.usage.all_days(first, last):
            if day.tenant in spent:
                spent[day.tenant] += day.estimated_usd(self.memory_mb)
        month = month_of(now)
        return [BudgetStatus(t, month, budgets[t], spent[t]) for t in sorted(budgets)]


class BudgetCache(TenantCache[BudgetStatus]):
    """Tenants' statuses as read, with the instant (epoch seconds) of the read (thread-safe). Every cache of
    the process is reachable by :func:`forget_cached`."""

    def __init__(self) -> None:
        super().__init__()
        #: Counts the forgets: a read that began before one is not kept (it may predate the change).
        self.generation = 0
        _CACHES.add(self)

    def forget(self, tenant: str | None = None) -> None:
        self.generation += 1
        super().forget(tenant)

    def fresh_at(self, tenant: str, now: datetime, max_age: float) -> BudgetStatus | None:
        """The tenant's status if read less than ``max_age`` seconds before ``now``, in its month."""
        status = self.fresh(tenant, now.timestamp(), max_age)
        return status if status is not None and status.month == month_of(now) else None


#: The live caches of this process (a gate's lives as long as its dispatcher: on AWS the container).
_CACHES: weakref.WeakSet[BudgetCache] = weakref.WeakSet()


def forget_cached(tenant: str) -> None:
    """Forget ``tenant`` in every cache of the process (a budget was set or cleared): in the embedded
    mode the API and the dispatcher share one process, so the next tick reads the new budget."""
    for cache in list(_CACHES):
        cache.forget(tenant)


class Notifier(Protocol):
    """What the warnings need of :class:`jobsched.services.notifications.DeadLetterNotifier`."""

    def deliver(self, item: Mapping[str, Any], now: datetime) -> str: ...


class BudgetWarnings:
    """The once-per-month 80 % notification (see the module docstring)."""

    def __init__(
        self,
        dynamo: Table,
        runs_table: str,
        make_notifier: Callable[[], Notifier],
        *,
        marker_ttl: timedelta = MARKER_TTL,
    ):
        self.dynamo = dynamo
        self.runs_table = runs_table
        #: Builds the notifier on the first warning: a dispatcher's cold start imports no notifier.
        self.make_notifier = make_notifier
        self._notifier: Notifier | None = None
        self.marker_ttl = marker_ttl
        #: (tenant, month) whose notification this container saw settled: no further write or read.
        self._settled: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def warn(self, status: BudgetStatus, now: datetime) -> str:
        """Owe and deliver the month's notification of ``status`` (at or above 80 %): what the
        delivery answered (``sent``, ``none``...), or ``settled`` when it was done before."""
        key = (status.tenant, status.month)
        with self._lock:
            if key in self._settled:
                return "settled"
        figures = status.to_dict()
        marker: dict[str, Any] = {
            **marker_key(status.tenant, status.month),
            "tenant": status.tenant,
            "monthly_usd": figures["monthly_usd"],
            "spent_usd": figures["spent_usd"],
            "percent_used": figures["percent_used"],
            "warned_at": to_iso(now),
            NOTIFY_PENDING: to_iso(now),
            "expires_at": int((now + self.marker_ttl).timestamp()),
        }
        try:
            self.dynamo.put(self.runs_table, marker, condition="attribute_not_exists(run_key)")
        except ConditionFailed:
            found = self.dynamo.get(self.runs_table, marker_key(status.tenant, status.month), consistent=True)
            if found is None or NOTIFY_PENDING not in found:
                self._settle(key)
                return "settled"
            marker = dict(found)
        else:
            logger.warning(
                "tenant %s used %s %% of its monthly budget of %s USD (%s)",
                status.tenant,
                figures["percent_used"],
                status.monthly_usd,
                status.month,
            )
        if self._notifier is None:
            self._notifier = self.make_notifier()
        outcome = self._notifier.deliver(marker, now)
        if outcome not in ("retrying", "skipped"):
            self._settle(key)
        return outcome

    def _settle(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._settled.add(key)


@dataclass
class BudgetGate:
    """The dispatcher's cached view of tenants' budgets: :meth:`capped` per due job. The TTL is
    counted on the instants the dispatcher passes (a tick's ``now``), so a test or the cost benchmark
    on a fake clock reads as often as a deployment does."""

    service: BudgetService
    ttl_seconds: float = DEFAULT_TTL_SECONDS
    warnings: BudgetWarnings | None = None
    cache: BudgetCache = field(default_factory=BudgetCache)
    #: Statuses read (not served from the cache): what the tests count.
    reads: int = 0

    def status(self, tenant: str, now: datetime) -> BudgetStatus | None:
        """The tenant's status, from the cache when read less than ``ttl_seconds`` before ``now`` in
        the same month; None when it could not be read (logged; dispatch goes on, and it is read again
        after the TTL)."""
        cached = self.cache.fresh_at(tenant, now, self.ttl_seconds)
        if cached is not None:
            return cached
        self.reads += 1
        generation = self.cache.generation
        try:
            status = self.service.status(tenant, now, dispatch=True)
        except Exception:
            # A budget is a guardrail on an estimate: a failed read must not stop every tenant's
            # dispatch. Remembered as "no budget" for one TTL, so a failing store is not hammered.
            logger.exception("could not read the budget of tenant %s; dispatching without it", tenant)
            self.cache.keep(tenant, now.timestamp(), BudgetStatus(tenant, month_of(now), None, 0.0))
            return None
        if self.cache.generation == generation:  # a set or clear during the read: read again next time
            self.cache.keep(tenant, now.timestamp(), status)
        if self.warnings is not None and status.warned:
            try:
                self.warnings.warn(status, now)
            except Exception:
                logger.exception("could not owe the budget notification of tenant %s", tenant)
        return status

    def capped(self, tenant: str, now: datetime) -> bool:
        """Whether the tenant's new runs are to be recorded skipped (reason ``budget``)."""
        status = self.status(tenant, now)
        return status is not None and status.capped

    def has_budget(self, tenant: str, now: datetime) -> bool:
        """Whether the tenant has a monthly budget (from the cache: the dispatcher asks it per due job
        it sends runs for, right after :meth:`capped`). The dispatcher marks the messages of such a
        tenant ``budgeted``: only those make the worker check the cap before a first attempt."""
        status = self.status(tenant, now)
        return status is not None and status.monthly_usd is not None

    def refuse_if_capped(self, tenant: str, now: datetime, operation: str) -> None:
        """:class:`BudgetExhaustedError` (409 ``budget_exhausted``) when the tenant is over its monthly
        budget: what a trigger, a backfill and a replay ask before they write anything."""
        status = self.status(tenant, now)
        if status is not None and status.capped:
            raise BudgetExhaustedError(exhausted_message(status, operation))
