"""Run statistics per minute (decision 0061): what an ended run adds, lag bins and percentiles, and
how a range is aligned to buckets and summed. Tables of fixed instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.run_stats import (
    LAG_BINS,
    buckets,
    lag_bin,
    minute_key,
    percentile,
    stats_range,
    tally,
    tally_run,
)

T = datetime(2026, 12, 5, 10, 7, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0.0, "lag_b0"),
        (0.5, "lag_b0"),
        (0.51, "lag_b1"),
        (4.0, "lag_b3"),
        (3600.0, "lag_b10"),
        (3600.5, "lag_b11"),
        (10 * 86400.0, "lag_b11"),
    ],
)
def test_lag_bins_have_inclusive_upper_bounds(seconds, expected):
    assert lag_bin(seconds) == expected


def run(state, *, due=T, started=None, trigger="schedule", tenant="acme", dl=False):
    item = {"tenant": tenant, "state": state, "due_at": due.isoformat(), "trigger": trigger}
    if started is not None:
        item["started_at"] = started.isoformat()
    if dl:
        item["dl_at"] = started.isoformat() if started else due.isoformat()
    return item


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (run("succeeded", started=T + timedelta(seconds=1.5)), {"succeeded": 1, "lag_b2": 1}),
        (run("failed", started=T, dl=True), {"failed": 1, "dead_lettered": 1, "lag_b0": 1}),
        (run("skipped"), {"skipped": 1}),
        (run("succeeded", started=T + timedelta(hours=1), trigger="manual"), {"succeeded": 1}),
        (run("succeeded", started=T - timedelta(seconds=3)), {"succeeded": 1, "lag_b0": 1}),
    ],
)
def test_an_ended_run_adds_its_outcome_and_its_start_lag_to_its_due_minute(item, expected):
    assert tally_run(item) == ("acme", "20261205T1007", expected)
    assert minute_key(T) == "20261205T1007"


def test_active_runs_are_not_counted():
    assert tally([run("queued"), run("running"), run("retrying")]) == {}


def test_runs_of_a_tenant_and_minute_add_up_apart_from_others():
    items = [
        run("succeeded"),
        run("succeeded", due=T + timedelta(seconds=20)),
        run("failed", tenant="globex"),
        run("cancelled", due=T + timedelta(minutes=1)),
    ]
    assert tally(items) == {
        ("acme", "20261205T1007"): {"succeeded": 2},
        ("globex", "20261205T1007"): {"failed": 1},
        ("acme", "20261205T1008"): {"cancelled": 1},
    }


def test_percentiles_are_the_upper_bound_of_their_bin():
    bins = {"lag_b0": 90, "lag_b3": 9, "lag_b8": 1}
    assert (percentile(bins, 50), percentile(bins, 99), percentile(bins, 100)) == (0.5, 5.0, 300.0)
    assert percentile({}, 50) is None


@pytest.mark.parametrize(
    ("start", "end", "bucket", "aligned", "count"),
    [
        (T, T + timedelta(hours=1), "minute", ("20261205T1007", "20261205T1107"), 61),
        (T, T + timedelta(days=1), "hour", ("20261205T1000", "20261206T1059"), 25),
        (T - timedelta(days=6), T, "day", ("20261129T0000", "20261205T2359"), 7),
        (T - timedelta(days=7), T, "hour", ("20261128T1000", "20261205T1059"), 169),  # the console's week
    ],
)
def test_a_range_is_aligned_to_whole_buckets(start, end, bucket, aligned, count):
    span = stats_range(start, end, bucket)
    assert (span.first_key(), span.last_key()) == aligned
    assert len(span.bucket_starts()) == count


@pytest.mark.parametrize(
    ("start", "end", "bucket", "field"),
    [
        (T, T, "minute", "from"),
        (T, T - timedelta(hours=1), "hour", "from"),
        (T - timedelta(days=8), T, "day", "from"),
        (T - timedelta(days=2), T, "minute", "bucket"),
        (T - timedelta(hours=1), T, "week", "bucket"),
        (T.replace(tzinfo=None), T, "minute", "from"),
        (datetime(1, 1, 1, tzinfo=UTC), T, "day", "from"),
        (T, datetime(9999, 12, 31, 23, 59, tzinfo=UTC), "day", "to"),
    ],
)
def test_bad_ranges_name_their_field(start, end, bucket, field):
    with pytest.raises(ValidationError) as raised:
        stats_range(start, end, bucket)
    assert raised.value.field == field


def test_buckets_sum_minutes_and_keep_empty_ones():
    span = stats_range(datetime(2026, 12, 5, 8, tzinfo=UTC), datetime(2026, 12, 5, 11, tzinfo=UTC), "hour")
    minutes = [
        {"minute": "20261205T0810", "succeeded": 2, "lag_b0": 2},
        {"minute": "20261205T0859", "failed": 1, "lag_b5": 1},
        {"minute": "20261205T1030", "skipped": 4},
        {"minute": "20261205T1100", "succeeded": 9},  # outside: the range ends at 11:00
    ]
    out = buckets(span, minutes)
    assert [(b["succeeded"], b["failed"], b["skipped"], b["lag_count"]) for b in out] == [
        (2, 1, 0, 3),
        (0, 0, 0, 0),
        (0, 0, 4, 0),
    ]
    assert (out[0]["lag_p50"], out[0]["lag_p99"], out[1]["lag_p50"]) == (0.5, 30.0, None)
    assert len(out[0]["lag_bins"]) == len(LAG_BINS)
