"""The pure rules of spend caps (decision 0062): the budget's validation, the month, the state."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from jobsched.core.budgets import BudgetStatus, month_of, month_to_date, validate_budget
from jobsched.core.errors import ValidationError


@pytest.mark.parametrize(
    ("spent", "budget", "state"),
    [(0.0, None, "none"), (0.0, 10.0, "ok"), (7.99, 10.0, "ok"), (8.0, 10.0, "warning"),
     (9.99, 10.0, "warning"), (10.0, 10.0, "capped"), (25.0, 10.0, "capped")],
)  # fmt: skip
def test_the_state_is_ok_under_80_percent_warning_from_80_capped_from_100(spent, budget, state):
    assert BudgetStatus("acme", "2026-03", budget, spent).state == state


@pytest.mark.parametrize(
    "value", [0, -1, 0.0, 1e-7, 5e-324, float("nan"), float("inf"), "10", True, None, 1e10]
)
def test_a_budget_must_be_a_positive_finite_number_of_usd(value):
    with pytest.raises(ValidationError) as caught:
        validate_budget(value)
    assert caught.value.field == "monthly_usd"


def test_a_budget_may_be_a_fraction_of_a_dollar_down_to_a_millionth():
    assert validate_budget(0.5) == 0.5
    assert validate_budget(0.000001) == 0.000001


@pytest.mark.parametrize(
    ("instant", "month", "first", "last"),
    [
        (datetime(2026, 3, 2, 12, tzinfo=UTC), "2026-03", date(2026, 3, 1), date(2026, 3, 2)),
        # 1 March 01:00 at UTC+2 is still 28 February in UTC: the month is UTC's
        (datetime(2026, 3, 1, 1, tzinfo=timezone(timedelta(hours=2))), "2026-02", date(2026, 2, 1),
         date(2026, 2, 28)),
    ],
)  # fmt: skip
def test_the_month_and_its_days_are_utc(instant, month, first, last):
    assert month_of(instant) == month
    assert month_to_date(instant) == (first, last)


def test_a_naive_instant_is_refused():
    with pytest.raises(ValueError):
        month_of(datetime(2026, 3, 2))
