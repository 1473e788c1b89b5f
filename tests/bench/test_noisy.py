"""The noisy-neighbour benchmark against the real embedded mode, on a small burst. Its figures are
wall-clock measurements of a live system, so only their presence and consistency are asserted."""

from __future__ import annotations

import argparse

import pytest

from jobsched.bench.noisy import NoisyConfig, run_noisy
from jobsched.cli.commands.bench import _validate
from jobsched.core.errors import ValidationError


@pytest.fixture(scope="module")
def noisy() -> dict:
    return run_noisy(NoisyConfig(burst_runs=100, quiet_runs=3, quiet_interval_seconds=0.2))


@pytest.mark.slow
def test_both_modes_run_every_run_of_the_burst_and_of_the_quiet_tenant(noisy: dict) -> None:
    """Given a burst of 100 runs and 3 quiet runs, with fair queues and without
    Then every run started in both modes, and the figures say which mode is which."""
    assert noisy["complete"] is True
    for name, fair in (("fair", True), ("fifo", False)):
        mode = noisy[name]
        assert mode["fair_queues"] is fair
        assert (mode["noisy_runs"], mode["noisy_started"]) == (100, 100)
        assert (mode["quiet_runs"], mode["quiet_started"]) == (3, 3)


@pytest.mark.slow
def test_quiet_percentiles_are_ordered_and_not_negative(noisy: dict) -> None:
    """Given the measured quiet lags / Then 0 <= p50 <= p99 <= max wherever runs met the burst."""
    for name in ("fair", "fifo"):
        mode = noisy[name]
        if mode["quiet_during_burst"]:
            assert 0 <= mode["quiet_p50_seconds"] <= mode["quiet_p99_seconds"] <= mode["quiet_max_seconds"]
    assert noisy["goal_p99_seconds"] == 3.0


@pytest.mark.parametrize("runs", [99, 5001])
def test_a_noisy_burst_outside_its_range_is_refused(runs: int) -> None:
    """Given --noisy-runs outside 100..5000 / Then the command refuses it with a clear message."""
    args = argparse.Namespace(
        runs=1000, jobs=100, shards=None, payload_bytes=1024, lag_runs=100, noisy_runs=runs
    )
    with pytest.raises(ValidationError, match=r"--noisy-runs must be 100\.\.5000"):
        _validate(args)


@pytest.mark.slow
def test_each_quiet_run_is_on_the_timeline_in_trigger_order(noisy: dict) -> None:
    """Given the 3 quiet runs of each mode / Then each is on ``quiet_timeline`` in the order they were
    triggered, with its lag, of which the part after the trigger answered is no more than the whole,
    and the slowest counted run's lag is on it."""
    for name in ("fair", "fifo"):
        mode = noisy[name]
        timeline = mode["quiet_timeline"]
        assert len(timeline) == mode["quiet_runs"] == 3
        dues = [entry["due_seconds"] for entry in timeline]
        assert dues == sorted(dues)
        for entry in timeline:
            assert 0 <= entry["after_enqueue_seconds"] <= entry["lag_seconds"]
        if mode["quiet_during_burst"]:
            assert max(entry["lag_seconds"] for entry in timeline) >= mode["quiet_max_seconds"]
