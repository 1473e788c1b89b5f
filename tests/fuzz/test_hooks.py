"""The fuzzer's generators draw only what the API accepts (else a clean run would prove nothing)."""

from __future__ import annotations

from datetime import UTC, datetime

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
