"""The peak model (``jobsched bench --peak``, decision 0055): the capacity plan's pre-warming against the
standard mapping and against provisioned pollers, on the documented scaling rates, with a stated cold
start (the command measures it; here it is fixed so the figures are exact)."""

from __future__ import annotations

import pytest

from jobsched.bench.peak import PeakConfig, daily_shape, percentile, run_peak


def test_the_day_holds_the_peak_the_hourly_jobs_and_the_per_minute_crons():
    shape = dict(daily_shape(10_000))
    assert shape[9 * 3600.0] == 10_000 + 2000 + 200
    assert shape[5 * 3600.0] == 200 and shape[6 * 3600.0] == 2200
    assert sum(shape.values()) == 24 * 60 * 200 + 15 * 2000 + 10_000


def test_percentiles_of_weighted_values():
    assert percentile([(1.0, 98), (10.0, 2)], 0.5) == 1.0
    assert percentile([(1.0, 98), (10.0, 2)], 0.99) == 10.0
    assert percentile([], 0.99) == 0.0


@pytest.fixture(scope="module")
def day() -> dict:
    """The simulated day both tests read (one run: they ask for the same configuration; the group keeps
    them on one xdist worker)."""
    return run_peak(PeakConfig(cold_start_seconds=1.0), measure=False)


@pytest.mark.slow  # a simulated day of 10,000-run peaks (the module's one run: 7-10 s)
@pytest.mark.xdist_group("peak_day")
def test_prewarming_shortens_the_peaks_start_lag_and_provisioned_pollers_meet_the_goal(day):
    figures = day
    base, warm, pollers = figures["baseline"], figures["prewarm"], figures["prewarm_pollers"]
    # Then each step shortens the peak's p99, and only pollers ready at 09:00 start it within 5 s
    assert base["peak_lag_p99"] > warm["peak_lag_p99"] > pollers["peak_lag_p99"]
    assert pollers["peak_lag_p99"] < 5.0 <= warm["peak_lag_p99"]
    # and the warm capacity costs something only where it is configured
    assert base["warm_usd_per_day"] == 0 and warm["warm_usd_per_day"] > 0
    assert base["most_invocations"] == 20  # the deployment's MaximumConcurrency, never raised


@pytest.mark.slow  # reads the module's simulated day
@pytest.mark.xdist_group("peak_day")
def test_with_the_fair_share_a_lone_tenant_keeps_pre_warming_because_its_slots_follow_the_raise(day):
    # Given the day's one tenant and the share at 0.8 (the mapping's base 25, the tenant's slots 20)
    figures = day
    warm, shared, fixed = figures["prewarm"], figures["prewarm_share"], figures["prewarm_share_fixed"]
    # Then with its slots following the raised ceiling it starts the peak as without the share (the
    # mapping's ramp, not the ceiling, bounds it: 108 invocations at most, under floor(0.8 x ceiling))
    assert shared["peak_lag_p99"] == warm["peak_lag_p99"] == 20.5
    assert shared["most_invocations"] == warm["most_invocations"] == 108
    # while slots fixed at 20 would have made every raise head-room: the baseline's lag
    assert fixed["most_invocations"] == 20
    assert fixed["peak_lag_p99"] > 3 * warm["peak_lag_p99"]
    # And where the ceiling bounds the peak (pollers ready at 09:00), the tenant gets the raise but its
    # head-room (a fifth): 195 invocations against 244, p99 6 s against 4 s
    pollers, pollers_shared = figures["prewarm_pollers"], figures["prewarm_pollers_share"]
    assert (pollers["most_invocations"], pollers_shared["most_invocations"]) == (244, 195)
    assert (pollers["peak_lag_p99"], pollers_shared["peak_lag_p99"]) == (4.0, 6.0)
