"""``GET /stats``: the calling tenant's runs per bucket from the per-minute statistics (decision 0061);
a clear 422 naming the field for a bad range, never another tenant's counts."""

from __future__ import annotations

from datetime import timedelta

from jobsched.aws.metering import Meter
from jobsched.aws.queue_depths import PARTITION
from jobsched.aws.run_stats_store import RunStatsStore
from jobsched.compose.pipeline import dynamo_for, queue_depths_from_settings
from jobsched.core.instants import from_iso
from jobsched.core.run_stats import LAG_BOUNDS, lag_bin, minute_key
from tests.api.events import ACME, GLOBEX, body_of
from tests.aws.conftest import T0


def seed(aws, counts):
    """Statistics items as the sweeper adds them: {(tenant, instant): counters}."""
    dynamo = dynamo_for(aws.settings, aws.clients.dynamodb, Meter())
    store = RunStatsStore(dynamo, aws.settings.runs_table, timedelta(days=30))
    store.add({(tenant, minute_key(at)): c for (tenant, at), c in counts.items()})


def test_minute_buckets_of_the_last_hour_by_default(aws, call, clock):
    # Given two minutes with runs of acme, and one of globex
    seed(
        aws,
        {
            ("acme", T0 - timedelta(minutes=10)): {"succeeded": 3, lag_bin(0.3): 2, lag_bin(4.0): 1},
            ("acme", T0 - timedelta(minutes=2)): {"failed": 1, "dead_lettered": 1},
            ("globex", T0 - timedelta(minutes=2)): {"succeeded": 7},
        },
    )
    # When acme asks for its stats with no range
    response = call("GET", "/stats", headers=ACME)
    # Then it gets the 60 minutes up to now, its own counts in the right ones
    assert response["statusCode"] == 200
    body = body_of(response)
    assert body["bucket"] == "minute" and body["lag_bounds"] == list(LAG_BOUNDS)
    assert len(body["buckets"]) == 60
    assert from_iso(body["buckets"][0]["start"]) == T0 - timedelta(hours=1)
    busy = {from_iso(b["start"]): b for b in body["buckets"] if b["succeeded"] or b["failed"]}
    assert sorted(busy) == [T0 - timedelta(minutes=10), T0 - timedelta(minutes=2)]
    ten, two = busy[T0 - timedelta(minutes=10)], busy[T0 - timedelta(minutes=2)]
    assert (ten["succeeded"], ten["lag_count"], ten["lag_p50"], ten["lag_p99"]) == (3, 3, 0.5, 5.0)
    assert (two["succeeded"], two["failed"], two["dead_lettered"], two["lag_p50"]) == (0, 1, 1, None)


def test_hour_buckets_sum_their_minutes(aws, call):
    seed(
        aws,
        {
            ("acme", T0 - timedelta(hours=2, minutes=m)): {"succeeded": 1, "skipped": 1}
            for m in range(0, 60, 5)
        },
    )
    start = (T0 - timedelta(hours=3)).isoformat()
    response = call(
        "GET", "/stats", headers=ACME, query={"from": start, "to": T0.isoformat(), "bucket": "hour"}
    )
    body = body_of(response)
    # 09:05..09:55 in the first hour, 10:00 in the second, nothing in the third
    assert [from_iso(b["start"]) for b in body["buckets"]] == [T0 - timedelta(hours=h) for h in (3, 2, 1)]
    assert [(b["succeeded"], b["skipped"]) for b in body["buckets"]] == [(11, 11), (1, 1), (0, 0)]


def test_another_tenants_counts_are_never_answered(aws, call):
    seed(aws, {("acme", T0 - timedelta(minutes=5)): {"succeeded": 4}})
    body = body_of(call("GET", "/stats", headers=GLOBEX))
    assert sum(b["succeeded"] for b in body["buckets"]) == 0


def test_bad_ranges_are_422_naming_the_field(call):
    cases = [
        ({"bucket": "fortnight"}, "bucket"),
        ({"from": T0.isoformat(), "to": (T0 - timedelta(hours=1)).isoformat()}, "from"),
        ({"from": (T0 - timedelta(days=8)).isoformat(), "to": T0.isoformat(), "bucket": "hour"}, "from"),
        ({"from": (T0 - timedelta(days=2)).isoformat(), "to": T0.isoformat(), "bucket": "minute"}, "bucket"),
        ({"from": "yesterday"}, "from"),
        ({"from": "2026-03-02T12:00:00"}, "from"),
        ({"to": "0001-01-01T00:00:00Z"}, "to"),
        ({"from": "9999-12-31T23:00:00Z", "to": "9999-12-31T23:59:00Z", "bucket": "day"}, "from"),
    ]
    for query, field in cases:
        response = call("GET", "/stats", headers=ACME, query=query)
        assert response["statusCode"] == 422, query
        assert field in response["body"], (query, response["body"])


def test_stats_need_an_authenticated_caller(call):
    assert call("GET", "/stats")["statusCode"] == 401


OPS = {"authorization": "Bearer tok-root"}


def seed_depths(aws, samples):
    """Depth samples as the sweeper writes them: {instant: {"<queue>_<figure>": n}}."""
    dynamo = dynamo_for(aws.settings, aws.clients.dynamodb, Meter())
    depths = queue_depths_from_settings(aws.settings, aws.clients, dynamo)
    for at, counts in samples.items():
        dynamo.put(aws.settings.runs_table, {"job_id": PARTITION, "run_key": minute_key(at), **counts})
    return depths


def test_queue_depth_per_bucket_for_an_administrator(aws, call):
    # Given two samples in the same hour and one an hour later (decision 0064)
    seed_depths(
        aws,
        {
            T0 - timedelta(hours=2, minutes=50): {
                "high_visible": 3,
                "default_visible": 40,
                "default_delayed": 5,
            },
            T0 - timedelta(hours=2, minutes=10): {
                "high_visible": 1,
                "default_visible": 90,
                "default_delayed": 2,
            },
            T0 - timedelta(minutes=30): {"default_in_flight": 7},
        },
    )
    # When an administrator asks for the last three hours by hour
    query = {"from": (T0 - timedelta(hours=3)).isoformat(), "to": T0.isoformat(), "bucket": "hour"}
    response = call("GET", "/stats/queues", headers=OPS, query=query)
    # Then every queue is named, each bucket holds its highest sample per queue and figure
    assert response["statusCode"] == 200
    body = body_of(response)
    assert body["queues"] == ["high", "default", "low", "long", "container"]
    assert [b["samples"] for b in body["buckets"]] == [2, 0, 1]
    first, _, last = body["buckets"]
    assert first["queues"]["default"] == {"visible": 90, "in_flight": None, "delayed": 5}
    assert first["queues"]["high"]["visible"] == 3
    assert last["queues"]["default"] == {"visible": None, "in_flight": 7, "delayed": None}


def test_queue_depth_is_for_administrators_only(aws, call):
    # Depth is a figure of the queues every tenant shares: a tenant is refused, naming why
    response = call("GET", "/stats/queues", headers=ACME)
    assert response["statusCode"] == 403
    assert "not an administrator" in body_of(response)["message"]


def test_queue_depth_range_errors_name_the_field(call):
    query = {"from": "2026-03-01T00:00:00Z", "to": "2026-03-20T00:00:00Z"}
    response = call("GET", "/stats/queues", headers=OPS, query=query)
    assert response["statusCode"] == 422
    assert "from" in body_of(response)["message"]
