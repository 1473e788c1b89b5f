"""The lag benchmark against the real embedded mode, on a small burst. Its figures are wall-clock
measurements of a live system, so only their presence and consistency are asserted, never their size."""

from __future__ import annotations

import pytest

from jobsched.bench.lag import LagConfig, run_lag

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lag() -> dict:
    return run_lag(LagConfig(runs=5, lead_seconds=4.0, timeout_seconds=30.0)).to_dict()


def test_every_run_of_the_burst_starts_and_is_measured(lag):
    # Given 5 one-off jobs due in the same second, created through the API / Then all 5 started
    assert (lag["runs"], lag["started"], lag["not_started"]) == (5, 5, 0)
    assert lag["setup"]["jobs_created"] == 5


def test_lag_percentiles_are_ordered_and_not_negative(lag):
    # Given the measured lags / Then min <= p50 <= p99 <= max and no run started before it was due
    assert 0 <= lag["min_seconds"] <= lag["p50_seconds"] <= lag["p99_seconds"] <= lag["max_seconds"]


def test_the_burst_is_due_on_a_whole_second(lag):
    # Given the due instant / Then it has no fraction of a second (every run is due in the same second)
    assert lag["setup"]["due_at"].endswith(":00.000Z") or lag["setup"]["due_at"].endswith(".000Z")
