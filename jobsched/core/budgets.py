"""Spend caps per tenant: the monthly budget, the spend measured against it, and its state. Pure.

An administrator sets a tenant's monthly budget in USD (docs/semantics/limits.md, "Spend caps";
decision 0062). The spend is the tenant's month-to-date ``estimated_usd``: the sum of its usage
items (:mod:`jobsched.core.usage`) from the first day of the UTC month to today. Its state:

* ``none``: no budget set;
* ``ok``: spend below :data:`WARN_FRACTION` (80 %) of the budget;
* ``warning``: at or above 80 %, below 100 % (the tenant's owners are notified once per month);
* ``capped``: at or above 100 %: new runs of the tenant are recorded ``skipped`` with reason
  ``budget`` until the budget is raised or cleared, or a new month begins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from jobsched.core.errors import ValidationError

#: The fraction of the budget at which the tenant's owners are notified.
WARN_FRACTION = 0.8
#: The smallest and the largest budget accepted, in USD (bounds on the input, not a policy: a
#: DynamoDB number has a magnitude of at least 1e-130, and the share used stays a finite number).
MIN_BUDGET_USD = 0.000001
MAX_BUDGET_USD = 1_000_000_000.0
#: The skip reason of an occurrence not run because its tenant was over its budget.
SKIP_REASON_BUDGET = "budget"
#: Notification type of the 80 % warning (dead letters are ``dead_letter``).
BUDGET_NOTIFICATION = "budget_warning"
#: The partition prefix of the once-per-month warning markers (Runs table): ``budget#<tenant>``.
MARKER_PREFIX = "budget#"

STATE_NONE = "none"
STATE_OK = "ok"
STATE_WARNING = "warning"
STATE_CAPPED = "capped"


def validate_budget(value: Any, field: str = "monthly_usd") -> float:
    """An amount of USD from :data:`MIN_BUDGET_USD` to :data:`MAX_BUDGET_USD`;
    :class:`ValidationError` naming ``field`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(f"{field} must be a number of USD, got {value!r}", field=field)
    if not MIN_BUDGET_USD <= value <= MAX_BUDGET_USD:
        raise ValidationError(
            f"{field} must be from {MIN_BUDGET_USD:.6f} to {MAX_BUDGET_USD:.0f} USD, got {value!r}",
            field=field,
        )
    return float(value)


def month_of(instant: datetime) -> str:
    """The UTC month of an aware instant, ``YYYY-MM``."""
    if instant.tzinfo is None:
        raise ValueError("budget months are taken from aware instants")
    return instant.astimezone(UTC).strftime("%Y-%m")


def month_to_date(instant: datetime) -> tuple[date, date]:
    """The first day of ``instant``'s UTC month and its UTC day: the days the spend adds up."""
    if instant.tzinfo is None:
        raise ValueError("budget months are taken from aware instants")
    today = instant.astimezone(UTC).date()
    return today.replace(day=1), today


@dataclass(frozen=True)
class BudgetStatus:
    """A tenant's budget (None: none set), its month-to-date spend and what follows from them."""

    tenant: str
    month: str
    monthly_usd: float | None
    spent_usd: float

    @property
    def fraction(self) -> float | None:
        """Spend / budget (None without a budget)."""
        return None if self.monthly_usd is None else self.spent_usd / self.monthly_usd

    @property
    def state(self) -> str:
        fraction = self.fraction
        if fraction is None:
            return STATE_NONE
        if fraction >= 1.0:
            return STATE_CAPPED
        return STATE_WARNING if fraction >= WARN_FRACTION else STATE_OK

    @property
    def capped(self) -> bool:
        return self.state == STATE_CAPPED

    @property
    def warned(self) -> bool:
        """At or above 80 % (``warning`` or ``capped``): the month's notification is owed."""
        return self.state in (STATE_WARNING, STATE_CAPPED)

    def to_dict(self) -> dict[str, Any]:
        fraction = self.fraction
        return {
            "tenant": self.tenant,
            "month": self.month,
            "monthly_usd": self.monthly_usd,
            "spent_usd": round(self.spent_usd, 8),
            "percent_used": None if fraction is None else round(fraction * 100, 2),
            "state": self.state,
        }


def exhausted_message(status: BudgetStatus, operation: str) -> str:
    """What a refused on-demand ``operation`` (a trigger, a backfill, a replay) tells the caller: the
    budget, the spend, and how to raise the cap."""
    figures = status.to_dict()
    return (
        f"{operation} refused: tenant {status.tenant} has spent {status.spent_usd:.2f} USD of its monthly "
        f"budget of {status.monthly_usd or 0:.2f} USD ({figures['percent_used']} % in {status.month}), so "
        "no new run starts; an administrator raises or clears it with "
        f"PUT /admin/tenants/{status.tenant}/budget (or DELETE), or it resets with the next UTC month"
    )


def marker_key(tenant: str, month: str) -> dict[str, str]:
    """The key of the tenant's warning marker for ``month`` (Runs table): one per tenant and month."""
    return {"job_id": f"{MARKER_PREFIX}{tenant}", "run_key": month}


def budget_notification_of(item: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of the 80 % notification, from the marker item. Its ``id``
    (``budget:<tenant>:<month>``) is the same on every delivery try: one notification per month."""
    tenant = str(item.get("tenant") or str(item["job_id"]).removeprefix(MARKER_PREFIX))
    month = str(item["run_key"])

    def number(name: str) -> float | None:  # stored as DynamoDB numbers (Decimal)
        value = item.get(name)
        return None if value is None else float(value)

    return {
        "type": BUDGET_NOTIFICATION,
        "id": f"budget:{tenant}:{month}",
        "tenant": tenant,
        "month": month,
        "monthly_usd": number("monthly_usd"),
        "spent_usd": number("spent_usd"),
        "percent_used": number("percent_used"),
        "reason": (
            f"the tenant's spend this month reached {number('percent_used')} % of its budget; at 100 % "
            "new runs are recorded skipped with reason budget"
        ),
        "budget": "/budget",
    }


def budget_subject(notification: dict[str, Any]) -> str:
    """An SNS subject (ASCII, at most 100 characters)."""
    text = f"jobsched: tenant {notification['tenant']} used {notification['percent_used']} % of its budget"
    return text.encode("ascii", "replace").decode()[:100]
