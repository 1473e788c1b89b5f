"""The forecast's pure rules (decision 0054): runs counted per minute and per second, each job's fires
read through the time core in its zone under the DST policy, runs queued ahead at their instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.core.forecast import (
    WINDOW_MINUTES,
    JobView,
    Queued,
    build_forecast,
    needed_concurrency,
    parse_entry,
    pool_needs,
)
from jobsched.core.ids import run_key_for
from jobsched.core.schedules import parse_schedule

NOW = datetime(2026, 3, 2, 8, 30, 20, tzinfo=UTC)


def job(
    expression: str,
    cursor: datetime,
    *,
    zone: str = "UTC",
    pool: str = "lambda",
    priority: str = "default",
    **kw,
):
    return JobView("acme", f"j-{expression}", pool, priority, parse_schedule(expression, zone, **kw), cursor)


def test_a_per_minute_job_counts_one_run_in_each_minute_from_its_cursor():
    # Given a per-minute job whose cursor is 08:45 (the runs before it are queued ahead)
    # When the forecast is built at 08:30:20
    forecast = build_forecast(NOW, [], [job("* * * * *", datetime(2026, 3, 2, 8, 45, tzinfo=UTC))])
    # Then minutes 0..14 are empty and 15..59 hold one run each
    counts = forecast.lanes[("lambda", "default")].counts
    assert counts[:15] == [0] * 15 and counts[15:] == [1] * 45
    assert forecast.start == datetime(2026, 3, 2, 8, 30, tzinfo=UTC)


def test_runs_queued_ahead_count_at_their_instants_and_a_burst_is_the_most_due_in_one_second():
    at = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    queued = [Queued("acme", "lambda", "high", at)] * 10_000 + [
        Queued("acme", "lambda", "high", at + timedelta(seconds=5))
    ]
    forecast = build_forecast(NOW, queued, [])
    lane = forecast.lanes[("lambda", "high")]
    assert lane.counts[30] == 10_001 and lane.bursts[30] == 10_000
    assert forecast.total == 10_001


def test_runs_before_now_or_after_the_window_are_not_counted():
    queued = [
        Queued("acme", "long", "default", NOW - timedelta(seconds=1)),
        Queued("acme", "long", "default", NOW + timedelta(hours=1)),
    ]
    assert build_forecast(NOW, queued, []).total == 0


def test_a_wall_clock_job_follows_its_zone_and_the_dst_policy():
    # Given a 02:30 daily job in New York on the spring-forward night (02:30 does not exist)
    now = datetime(2026, 3, 8, 6, 40, tzinfo=UTC)  # 01:40 EST
    cursor = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # the shifted occurrence: 03:00 EDT
    shifted = build_forecast(now, [], [job("30 2 * * *", cursor, zone="America/New_York")])
    skipped = build_forecast(now, [], [job("30 2 * * *", cursor, zone="America/New_York", dst_gap="skip")])
    # Then shift forecasts its run at 07:00 UTC (minute 20); skip forecasts none
    assert shifted.lanes[("lambda", "default")].counts[20] == 1 and shifted.total == 1
    assert skipped.total == 0


def test_a_per_second_job_is_capped_and_its_burst_is_one():
    forecast = build_forecast(NOW, [], [job("* * * * * *", NOW)])
    lane = forecast.lanes[("lambda", "default")]
    assert lane.counts[1] == 60 and lane.bursts[1] == 1
    assert forecast.total == WINDOW_MINUTES * 60 - 20  # from 08:30:21 to 09:29:59


def test_a_job_with_an_unparsable_schedule_or_no_cursor_forecasts_nothing():
    broken = JobView("acme", "x", "lambda", "default", None, NOW)
    done = job("* * * * *", NOW)
    done = JobView(done.tenant, done.job_id, done.pool, done.priority, done.schedule, None)
    assert build_forecast(NOW, [], [broken, done]).total == 0


def test_a_ledger_entry_gives_its_scheduled_instant_and_job():
    at = datetime(2026, 3, 2, 9, 0, 0, 250000, tzinfo=UTC)
    assert parse_entry(f"{run_key_for(at)}#report")[:2] == (at, "report")
    assert parse_entry(f"{run_key_for(at)}.m1#report")[:2] == (
        datetime(2026, 3, 2, 9, 0, 0, 250000, tzinfo=UTC),
        "report",
    )
    assert parse_entry("garbage") is None and parse_entry("20261345T000000.000Z#j") is None  # month 13


@pytest.mark.parametrize(
    ("count", "burst", "seconds", "within", "needed"),
    [
        (0, 0, 1.0, 5.0, 0),
        (60, 1, 1.0, 5.0, 1),  # one a second, 1 s each: one slot
        (600, 10, 30.0, 5.0, 300),  # spread: 600 x 30 s / 60 s
        (10_000, 10_000, 1.0, 5.0, 2000),  # a burst: each slot starts five in 5 s
        (3, 3, 60.0, 5.0, 3),  # never more than the burst
        (1, 1, 300.0, 5.0, 1),  # never more than the minute's runs
    ],
)
def test_needed_concurrency(count, burst, seconds, within, needed):
    assert needed_concurrency(count, burst, seconds, within) == needed


def test_pool_needs_add_the_lanes_of_one_queue():
    at = datetime(2026, 3, 2, 8, 40, tzinfo=UTC)
    queued = [Queued("a", "container", "high", at), Queued("a", "container", "low", at)]
    needs = pool_needs(build_forecast(NOW, queued, []), {"container": 300.0}, 5.0)
    # Then the two 300 s runs hold two tasks from minute 10 through minute 14, none after
    assert set(needs) == {"container"} and needs["container"][9:16] == [0, 2, 2, 2, 2, 2, 0]


def test_a_ledger_entry_gives_its_instant_job_and_run_key():
    at = datetime(2026, 3, 2, 9, 0, 0, 250000, tzinfo=UTC)
    assert parse_entry(f"{run_key_for(at)}.m1#report") == (at, "report", f"{run_key_for(at)}.m1")
    assert parse_entry("garbage") is None


def test_a_scheduled_run_queued_ahead_and_its_jobs_fire_at_the_same_instant_count_once():
    # Given a per-minute job whose cursor is still at 08:31 (read before a tick advanced it), and the
    # ledger naming that tick's runs of 08:31 and 08:32 (read after it), the second entry seen twice
    minute = datetime(2026, 3, 2, 8, 31, tzinfo=UTC)
    report = job("* * * * *", minute)
    queued = [
        Queued("acme", "lambda", "default", at, report.job_id, run_key_for(at))
        for at in (minute, minute + timedelta(minutes=1), minute + timedelta(minutes=1))
    ]
    # When the forecast is built at 08:30:20
    forecast = build_forecast(NOW, queued, [report])
    # Then every minute from 08:31 holds one run
    assert forecast.lanes[("lambda", "default")].counts == [0] + [1] * (WINDOW_MINUTES - 1)


def test_a_manual_run_at_a_fires_instant_and_runs_known_only_by_instant_all_count():
    # Given a manual run of a per-minute job at its 08:31 fire's instant, and two runs known only by
    # their instant
    at = datetime(2026, 3, 2, 8, 31, tzinfo=UTC)
    report = job("* * * * *", at)
    queued = [
        Queued("acme", "lambda", "default", at, report.job_id, run_key_for(at) + ".mX"),
        Queued("acme", "lambda", "default", at),
        Queued("acme", "lambda", "default", at),
    ]
    # When the forecast is built with the job's fires
    forecast = build_forecast(NOW, queued, [report])
    # Then the fire counts beside the manual run and both instant-only runs
    assert forecast.lanes[("lambda", "default")].counts[1] == 4
