"""Queue depth samples summed into buckets (decision 0064): per queue and figure, the highest sample
of the bucket; a bucket without a sample answers null, not zero. Fixed instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobsched.core.queue_depth import depth_buckets
from jobsched.core.run_stats import minute_key, stats_range

T = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)


def sample(at, **counts):
    return {"minute": minute_key(at), **counts}


def test_a_bucket_holds_the_highest_sample_of_each_queue_and_figure():
    # Given three samples in the first hour and one in the third
    samples = [
        sample(T + timedelta(minutes=5), default_visible=4, default_in_flight=1, default_delayed=9),
        sample(T + timedelta(minutes=10), default_visible=12, default_in_flight=0, default_delayed=3),
        sample(T + timedelta(minutes=15), default_visible=7, default_in_flight=2, default_delayed=0),
        sample(T + timedelta(hours=2, minutes=1), default_visible=1, default_in_flight=0, default_delayed=0),
    ]
    # When they are summed into hour buckets of three hours
    out = depth_buckets(stats_range(T, T + timedelta(hours=3), "hour"), ("default",), samples)
    # Then each bucket has its highest figures and its sample count; the empty one has nulls
    assert [b["start"] for b in out] == [T, T + timedelta(hours=1), T + timedelta(hours=2)]
    assert [b["samples"] for b in out] == [3, 0, 1]
    assert out[0]["queues"] == {"default": {"visible": 12, "in_flight": 2, "delayed": 9}}
    assert out[1]["queues"] == {"default": {"visible": None, "in_flight": None, "delayed": None}}
    assert out[2]["queues"] == {"default": {"visible": 1, "in_flight": 0, "delayed": 0}}


def test_a_queue_missing_from_a_sample_stays_null_and_samples_outside_the_range_are_ignored():
    # Given a sample that could not read the low queue, and one before the range
    samples = [sample(T - timedelta(minutes=1), high_visible=50), sample(T, high_visible=2, high_in_flight=1)]
    # When the first two minutes are summed
    out = depth_buckets(stats_range(T, T + timedelta(minutes=2), "minute"), ("high", "low"), samples)
    # Then the high queue's figures are there, the low queue's null, the earlier sample not counted
    assert out[0]["samples"] == 1
    assert out[0]["queues"]["high"] == {"visible": 2, "in_flight": 1, "delayed": None}
    assert out[0]["queues"]["low"] == {"visible": None, "in_flight": None, "delayed": None}
    assert out[1]["samples"] == 0
