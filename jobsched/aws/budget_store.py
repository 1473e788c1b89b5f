"""Tenants' monthly budgets (``lease_key = "budget#<tenant>"`` in the Leases table), set by an operator.

An item holds ``monthly_usd`` (a positive amount of USD), ``tenant`` and ``updated_at``; no item means
no budget. The spend measured against it is read from the usage items
(:class:`jobsched.aws.usage_store.UsageStore`), and the dispatcher's view of both is cached per
tenant (:class:`jobsched.services.budgets.BudgetGate`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.aws.metering import ConditionFailed
from jobsched.core.errors import NotFoundError
from jobsched.core.models import to_iso
from jobsched.ports.tables import Table

PREFIX = "budget#"


class BudgetStore:
    """Reads and writes the operator's per-tenant budgets (Leases table)."""

    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table

    def get(self, tenant: str) -> float | None:
        """The tenant's monthly budget in USD, or None when none is set."""
        item = self.dynamo.get(self.table, {"lease_key": PREFIX + tenant})
        return None if item is None else float(item["monthly_usd"])

    def put(self, tenant: str, monthly_usd: float, now: datetime) -> None:
        """Set (or replace) the tenant's budget."""
        item: dict[str, Any] = {
            "lease_key": PREFIX + tenant,
            "tenant": tenant,
            "monthly_usd": monthly_usd,
            "updated_at": to_iso(now),
        }
        self.dynamo.put(self.table, item)

    def delete(self, tenant: str) -> None:
        """Remove the tenant's budget; :class:`NotFoundError` if it had none."""
        try:
            self.dynamo.delete(
                self.table, {"lease_key": PREFIX + tenant}, condition="attribute_exists(lease_key)"
            )
        except ConditionFailed:
            raise NotFoundError(f"tenant {tenant} has no budget") from None

    def list(self) -> dict[str, float]:
        """Every tenant with a budget -> its budget (an operator's view: a Scan of a small table)."""
        return {
            str(i["tenant"]): float(i["monthly_usd"])
            for i in self.dynamo.scan_all(self.table)
            if str(i.get("lease_key", "")).startswith(PREFIX)
        }
