"""The fuzzer's generators draw only what the API accepts (else a clean run would prove nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings

from jobsched.core.dispatch_plan import first_fire_after
from jobsched.core.schedules import parse_schedule
from jobsched.services.notifications import NotifyPolicy
from tests.fuzz.hooks import HTTP_URLS, SCHEDULES, keeps_cross_field_rules

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(SCHEDULES)
def test_every_drawn_schedule_parses_and_fires(schedule: str) -> None:
    parsed = parse_schedule(schedule, "UTC")
    assert first_fire_after(parsed, NOW) is not None, schedule


@settings(max_examples=200, deadline=None)
@given(HTTP_URLS)
def test_every_drawn_url_is_a_webhook_the_api_accepts(url: str) -> None:
    assert NotifyPolicy().check({"webhook": url})["webhook"] == url


def test_cross_field_rules_are_kept():
    assert not keeps_cross_field_rules({"retry": {"base_seconds": 5, "max_seconds": 1}})
    assert not keeps_cross_field_rules({"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"})
    assert not keeps_cross_field_rules({"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z"})
    assert keeps_cross_field_rules({"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:10:00Z"})
    assert keeps_cross_field_rules(None)


def test_wire_graph_makes_unique_ids_and_parents_listed_earlier():
    """Given drawn nodes with a repeated id and parents that name nothing / When wired / Then ids
    are unique, each parent is a node listed earlier, once: the core's graph check accepts it."""
    from jobsched.core.dag import parse_workflow
    from tests.fuzz.hooks import wire_graph

    nodes = [
        {"id": "a", "target": {"handler": "demo.echo"}, "depends_on": ["x", "y"]},
        {"id": "a", "target": {"handler": "demo.echo"}, "depends_on": ["x", "y", "z", "x"]},
        {"id": "n1", "target": {"handler": "demo.echo"}, "depends_on": ["q"] * 5},
    ]
    wire_graph(nodes)
    ids = [n["id"] for n in nodes]
    assert len(set(ids)) == 3 and nodes[0]["depends_on"] == []
    for index, node in enumerate(nodes):
        assert set(node["depends_on"]) <= set(ids[:index])
        assert len(node["depends_on"]) == len(set(node["depends_on"]))
    assert len(parse_workflow({"nodes": nodes}).nodes) == 3


def test_the_usage_window_rule_is_kept():
    from datetime import date

    from tests.fuzz.hooks import keeps_usage_window

    today = date(2026, 12, 1)
    assert keeps_usage_window({}, today)
    assert keeps_usage_window({"to": "0001-01-03"}, today)
    assert keeps_usage_window({"from": "2026-11-01", "to": "2026-12-01"}, today)
    assert not keeps_usage_window({"from": "2026-10-31", "to": "2026-12-01"}, today)
    assert not keeps_usage_window({"from": "2026-12-02"}, today)


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"bucket": "hour"},
        {"bucket": "day"},
        {"from": "2026-12-01T00:00:00Z", "to": "2026-12-01T23:00:00Z"},
        {"from": "2026-11-24T00:00:00Z", "to": "2026-12-01T00:00:00Z", "bucket": "hour"},
        {"from": "2026-11-24T00:00:00Z", "to": "2026-12-01T00:00:01Z", "bucket": "hour"},
        {"from": "0367-01-20T22:03:27+07:11", "bucket": "minute"},
        {"to": "1970-01-01T00:30:00Z"},
        {"from": "2026-12-01T10:00:00Z", "to": "2026-12-01T09:00:00Z"},
        {"from": "9998-12-31T00:00:00Z", "to": "9998-12-31T12:00:00Z"},
        {"from": "2026-11-30T00:00:00Z", "to": "2026-12-01T00:00:00Z", "bucket": "minute"},
    ],
)
def test_the_stats_window_kept_is_one_the_api_accepts(query):
    # Given a GET /stats query / When the hook keeps it / Then the API's own rule accepts its range
    from jobsched.core.errors import ValidationError
    from jobsched.core.run_stats import stats_range
    from tests.fuzz.hooks import STATS_SPANS, keeps_stats_window

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    bucket = query.get("bucket", "minute")
    end = datetime.fromisoformat(query["to"]) if "to" in query else now
    start = datetime.fromisoformat(query["from"]) if "from" in query else end - STATS_SPANS[bucket]
    try:
        stats_range(start, end, bucket)
        accepted = True
    except ValidationError:
        accepted = False
    kept = keeps_stats_window(query, now)
    assert not kept or accepted, f"kept a range the API refuses: {query}"
    if query in ({}, {"bucket": "hour"}, {"bucket": "day"}):
        assert kept  # the defaults are a valid range


def test_cross_field_rules_keep_the_pools_timeout_limits():
    # Given bodies around the pools' limits (900 s on lambda and long, 43200 s on container; no pool
    # and a timeout over 900 s: container) / Then only those the API accepts are kept; a PATCH, which
    # cannot see the stored job, keeps a long timeout only beside pool container
    assert keeps_cross_field_rules({"timeout_seconds": 1684})
    assert keeps_cross_field_rules({"pool": "container", "timeout_seconds": 43200})
    assert not keeps_cross_field_rules({"pool": "lambda", "timeout_seconds": 1684})
    assert not keeps_cross_field_rules({"pool": "long", "target": {"http": {"timeout_seconds": 901}}})
    assert not keeps_cross_field_rules({"nodes": [{"id": "a", "pool": "lambda", "timeout_seconds": 1684.0}]})
    assert keeps_cross_field_rules({"nodes": [{"id": "a", "timeout_seconds": 1684}]})
    assert not keeps_cross_field_rules({"timeout_seconds": 1684}, patch=True)
    assert keeps_cross_field_rules({"timeout_seconds": 1684, "pool": "container"}, patch=True)
    assert not keeps_cross_field_rules({"pool": "lambda"}, patch=True)
    assert keeps_cross_field_rules({"pool": "lambda", "timeout_seconds": 60}, patch=True)
