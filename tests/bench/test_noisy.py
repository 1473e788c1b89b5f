"""The noisy-neighbour benchmark against the real embedded mode, on a small burst. Its figures are
wall-clock measurements of a live system, so only their presence and consistency are asserted."""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime, timedelta

import pytest

from jobsched.bench.noisy import LOG_SAMPLES, NoisyConfig, _LogWarnings, run_noisy, starts_per_second
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


@pytest.mark.slow
def test_each_mode_reports_its_starts_per_second_its_retried_runs_and_its_log_warnings(noisy: dict) -> None:
    """Given each mode's figures / Then its noisy starts per second add up to the runs started and
    span the start span's whole seconds, no noisy run needed a second attempt, and the log warnings
    are counted with at most five kept."""
    for name in ("fair", "fifo"):
        mode = noisy[name]
        per_second = mode["noisy_starts_per_second"]
        assert sum(per_second) == mode["noisy_started"] == 100
        assert len(per_second) == int(mode["noisy_start_span_seconds"]) + 1
        assert per_second[0] >= 1 and per_second[-1] >= 1
        assert mode["noisy_runs_with_more_than_one_attempt"] == 0
        assert len(mode["log_warning_samples"]) == min(LOG_SAMPLES, mode["log_warnings"])


def test_starts_per_second_counts_each_second_from_the_first_start() -> None:
    """Given starts 0, 0.7, 1.0, 3.5 and 3.99 s after the first (in any order) / Then [2, 1, 0, 2]: two
    in the first second, one in the second, none in the third, two in the fourth; none gives []."""
    at = datetime(2026, 12, 6, 23, 0, tzinfo=UTC)
    starts = [at + timedelta(seconds=s) for s in (3.5, 0.7, 1.0, 0.0, 3.99)]
    assert starts_per_second(starts) == [2, 1, 0, 2]
    assert starts_per_second([]) == []


def test_the_play_counts_warnings_and_errors_and_keeps_the_first_five() -> None:
    """Given the play's handler on a logger, When 7 warnings or errors and 1 info are logged / Then it
    counts 7 and keeps the first 5, with their level and logger."""
    handler = _LogWarnings()
    logger = logging.getLogger("jobsched.tests.noisy")
    logger.addHandler(handler)
    try:
        logger.info("not counted")
        for i in range(6):
            logger.warning("refused %d", i)
        logger.error("could not release")
    finally:
        logger.removeHandler(handler)
    assert handler.count == 7
    assert handler.samples == [f"WARNING jobsched.tests.noisy: refused {i}" for i in range(5)]
