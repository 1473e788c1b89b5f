"""Usage items per tenant and day in the Leases table (``lease_key = "usage#<tenant>#<YYYY-MM-DD>"``).

:meth:`UsageStore.add` is one ``UpdateItem`` of ``ADD`` counters per (tenant, day) a worker
invocation touched: adding is commutative, so concurrent invocations never lose a count. Items carry
``expires_at`` (the table's TTL) ``retention_days`` after their day. A tenant's days are read by key
(``BatchGetItem``, at most 31 days per call); the operator's view of every tenant scans the Leases
table for ``usage#`` items of the days asked (the table holds leases, limits, mappings and usage
items only: small).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from jobsched.core.usage import COUNTERS, DayUsage
from jobsched.ports.tables import Table

PREFIX = "usage#"
MAX_DAYS = 31


def usage_key(tenant: str, day: str) -> str:
    return f"{PREFIX}{tenant}#{day}"


def days_between(first: date, last: date) -> list[str]:
    return [(first + timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


class UsageStore:
    """Adds to and reads the usage items (metered client, Leases table)."""

    def __init__(self, dynamo: Table, table: str, retention_days: int = 30):
        self.dynamo = dynamo
        self.table = table
        self.retention_days = retention_days

    def add(self, usage: DayUsage) -> None:
        """Add ``usage``'s counters to its (tenant, day) item (created by the first add)."""
        counters = {name: value for name, value in usage.counters().items() if value}
        if not counters:
            return
        day = date.fromisoformat(usage.day)
        expires = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=self.retention_days + 1)
        names = {f"#c{i}": name for i, name in enumerate(counters)}
        values: dict[str, Any] = {f":c{i}": value for i, value in enumerate(counters.values())}
        adds = ", ".join(f"#c{i} :c{i}" for i in range(len(counters)))
        self.dynamo.update(
            self.table,
            {"lease_key": usage_key(usage.tenant, usage.day)},
            f"SET tenant = :t, #day = :d, expires_at = :exp ADD {adds}",
            names={**names, "#day": "day"},
            values={**values, ":t": usage.tenant, ":d": usage.day, ":exp": int(expires.timestamp())},
        )

    def tenant_days(self, tenant: str, first: date, last: date) -> list[DayUsage]:
        """The tenant's usage for each day of ``[first, last]`` that has any, oldest first."""
        keys = [{"lease_key": usage_key(tenant, day)} for day in days_between(first, last)]
        items = self.dynamo.batch_get(self.table, keys)
        found = [DayUsage.from_item(item) for item in items]
        return sorted(found, key=lambda u: u.day)

    def all_days(self, first: date, last: date) -> list[DayUsage]:
        """Every tenant's usage for the days of ``[first, last]``, by day then tenant (a Scan)."""
        wanted = set(days_between(first, last))
        items = [
            i
            for i in self.dynamo.scan_all(self.table)
            if str(i.get("lease_key", "")).startswith(PREFIX) and i.get("day") in wanted
        ]
        return sorted((DayUsage.from_item(i) for i in items), key=lambda u: (u.day, u.tenant))


__all__ = ["COUNTERS", "MAX_DAYS", "UsageStore", "days_between", "usage_key"]
