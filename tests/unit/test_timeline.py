"""Timeline behaviour outside the DST tables: rate(), at(), years, limits, skipped-gap records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.schedules import parse_schedule
from jobsched.core.timeline import fires_between, iter_fires, next_fires

AFTER = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_rate_fires_every_interval_from_the_epoch():
    # Given rate(7 minutes) with the default anchor (the Unix epoch)
    schedule = parse_schedule("rate(7 minutes)")
    # When the next fires are computed
    fires = next_fires(schedule, AFTER, 3)
    # Then they are whole multiples of 7 minutes since the epoch, 7 minutes apart
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert all((f.at - epoch) % timedelta(minutes=7) == timedelta(0) for f in fires)
    assert [b.at - a.at for a, b in pairwise(fires)] == [timedelta(minutes=7)] * 2
    assert timedelta(0) < fires[0].at - AFTER <= timedelta(minutes=7)


def test_rate_counts_from_its_anchor():
    # Given rate(1 day) anchored at a job's creation instant
    anchor = z("2026-05-30T09:15:30")
    schedule = parse_schedule("rate(1 day)", "Europe/London", anchor=anchor)
    # When the next fires after a later instant are computed
    fires = next_fires(schedule, AFTER, 2)
    # Then they keep the anchor's time of day in elapsed terms
    assert [f.at for f in fires] == [z("2026-06-02T09:15:30"), z("2026-06-03T09:15:30")]


def test_rate_follows_elapsed_time_through_a_transition():
    # Given rate(1 hour) in New York across the spring-forward gap
    schedule = parse_schedule("rate(1 hour)", "America/New_York")
    # When the fires are computed
    fires = next_fires(schedule, z("2026-03-08T05:30"), 3)
    # Then they are an hour apart in real time, with no DST note
    assert [f.at for f in fires] == [z("2026-03-08T06:00"), z("2026-03-08T07:00"), z("2026-03-08T08:00")]
    assert [f.local.hour for f in fires] == [1, 3, 4]
    assert all(f.note is None for f in fires)


def test_rate_fire_exactly_at_after_is_excluded():
    schedule = parse_schedule("rate(30 seconds)")
    fires = next_fires(schedule, z("2026-06-01T12:00:30"), 1)
    assert fires[0].at == z("2026-06-01T12:01:00")


def test_at_fires_once_in_its_zone():
    # Given a one-off in Tokyo
    schedule = parse_schedule("at(2026-12-01T09:00:00)", "Asia/Tokyo")
    # When more fires are asked for than exist
    fires = next_fires(schedule, AFTER, 5)
    # Then there is exactly one, at 09:00 Tokyo time
    assert [f.at for f in fires] == [z("2026-12-01T00:00")]
    assert fires[0].local.isoformat() == "2026-12-01T09:00:00+09:00"


def test_at_in_the_past_never_fires():
    schedule = parse_schedule("at(2026-01-01T00:00:00)")
    assert next_fires(schedule, AFTER, 1) == []


def test_seconds_field_fires_on_seconds():
    schedule = parse_schedule("*/20 * * * * *")
    assert [f.at for f in next_fires(schedule, z("2026-06-01T12:00:05"), 3)] == [
        z("2026-06-01T12:00:20"),
        z("2026-06-01T12:00:40"),
        z("2026-06-01T12:01:00"),
    ]


def test_year_field_jumps_to_the_listed_years_and_ends():
    # Given a schedule limited to 2028 and 2030
    schedule = parse_schedule("cron(0 0 1 JAN,JUL ? 2028,2030)")
    # When every fire is listed
    fires = list(iter_fires(schedule, AFTER))
    # Then there are the four, and the iteration ends
    assert [f.at for f in fires] == [
        z("2028-01-01T00:00"),
        z("2028-07-01T00:00"),
        z("2030-01-01T00:00"),
        z("2030-07-01T00:00"),
    ]


def test_year_field_in_the_past_never_fires():
    assert next_fires(parse_schedule("cron(0 0 * * ? 2020)"), AFTER, 3) == []


def test_either_day_rule_fires_on_the_13th_and_on_fridays():
    # Given "the 13th or any Friday" (both day fields restricted)
    schedule = parse_schedule("0 0 13 * 5")
    # When fires in June 2026 are listed
    fires = fires_between(schedule, z("2026-06-01T00:00"), z("2026-06-30T00:00"), 100)
    # Then June 5, 12, 13, 19, 26 (Fridays and the 13th)
    assert [f.at.day for f in fires] == [5, 12, 13, 19, 26]


def test_fires_between_includes_until_and_respects_limit():
    schedule = parse_schedule("0 * * * *")
    fires = fires_between(schedule, z("2026-06-01T00:00"), z("2026-06-01T03:00"), 10)
    assert [f.at.hour for f in fires] == [1, 2, 3]
    assert len(fires_between(schedule, z("2026-06-01T00:00"), z("2026-06-02T00:00"), 5)) == 5


def test_fires_between_with_until_before_after_is_empty():
    schedule = parse_schedule("* * * * *")
    assert fires_between(schedule, AFTER, AFTER - timedelta(hours=1), 10) == []


def test_skip_policy_can_report_the_skipped_gap_once():
    # Given two occurrences inside New York's spring-forward gap and dst_gap=skip
    schedule = parse_schedule("0,30 2 * * *", "America/New_York", dst_gap="skip")
    # When fires are listed with the skipped records
    fires = list(islice(iter_fires(schedule, z("2026-03-07T12:00"), include_skipped=True), 2))
    # Then one skipped record stands for the gap, at the first instant after it, then real fires
    assert [(f.at, f.note) for f in fires] == [
        (z("2026-03-08T07:00"), "dst_gap_skipped"),
        (z("2026-03-09T06:00"), None),
    ]


def test_skipped_record_does_not_hide_a_real_fire_at_the_gap_end():
    # Given 02:00, 02:30, 03:00, 03:30 daily under skip: the 02:xx ones are skipped, 03:00 fires
    schedule = parse_schedule("0,30 2,3 * * *", "America/New_York", dst_gap="skip")
    fires = list(islice(iter_fires(schedule, z("2026-03-07T12:00"), include_skipped=True), 3))
    assert [(f.at, f.note) for f in fires] == [
        (z("2026-03-08T07:00"), "dst_gap_skipped"),
        (z("2026-03-08T07:00"), None),
        (z("2026-03-08T07:30"), None),
    ]


def test_shifted_fire_and_a_regular_fire_on_the_same_instant_are_one():
    # Given 02:30 and 03:00 daily with dst_gap=shift: 02:30 moves to 03:00 EDT
    schedule = parse_schedule("0,30 2,3 * * *", "America/New_York")
    fires = next_fires(schedule, z("2026-03-08T06:00"), 2)
    # Then 03:00 fires once, then 03:30
    assert [f.at for f in fires] == [z("2026-03-08T07:00"), z("2026-03-08T07:30")]


@pytest.mark.parametrize("count", [0, -1, 1001, 2.5, True])
def test_count_out_of_range_is_rejected(count):
    with pytest.raises(ValidationError, match=r"count .* is out of range 1-1000"):
        next_fires(parse_schedule("@daily"), AFTER, count)


def test_naive_after_is_rejected():
    with pytest.raises(ValidationError, match="after must be a timezone-aware datetime"):
        next_fires(parse_schedule("@daily"), datetime(2026, 6, 1), 1)


def test_after_in_any_offset_means_the_same_instant():
    schedule = parse_schedule("0 12 * * *", "Europe/Paris")
    in_utc = next_fires(schedule, AFTER, 2)
    in_tokyo = next_fires(schedule, AFTER.astimezone(parse_schedule("@daily", "Asia/Tokyo").zone), 2)
    assert in_utc == in_tokyo


# (expression, after (UTC), the next fires' weekdays): 'N/step' in day-of-week runs to Saturday, as in
# croniter, robfig/cron and EventBridge ('MON/2'); 7 is only another way to write Sunday (issue 27 §3;
# Vixie cron and cronsim 2.x read '6/1' as Saturday and Sunday: see docs/semantics/time.md)
DOW_STEPS = [
    ("* * * * 6/1", "2026-01-03T23:58:00", ["Sat", "Sat"]),
    ("0 0 * * 1/2", "2026-01-04T12:00:00", ["Mon", "Wed", "Fri", "Mon"]),
    ("cron(0 0 ? * MON/2 *)", "2026-01-04T12:00:00", ["Mon", "Wed", "Fri", "Mon"]),
    ("0 0 * * 0/3", "2026-01-03T12:00:00", ["Sun", "Wed", "Sat", "Sun"]),
    ("0 0 * * 7/1", "2026-01-03T12:00:00", ["Sun", "Sun", "Sun", "Sun"]),
    ("0 0 * * 1-7/2", "2026-01-04T12:00:00", ["Mon", "Wed", "Fri", "Sun"]),
    ("0 0 * * SUN-SAT/3", "2026-01-03T12:00:00", ["Sun", "Wed", "Sat", "Sun"]),
]


@pytest.mark.parametrize(("expression", "after", "days"), DOW_STEPS)
def test_a_day_of_week_step_runs_to_saturday_and_7_is_only_sunday(expression, after, days):
    # Given a day-of-week step / When its next fires after a Saturday or Sunday are computed
    fires = next_fires(parse_schedule(expression), z(after), len(days))
    # Then they fall on the days croniter and robfig/cron give (no extra Sunday from '7')
    assert [f.at.strftime("%a") for f in fires] == days


def test_six_slash_one_fires_on_saturday_only_as_in_the_issue():
    # Given `jobsched preview '* * * * 6/1' --tz UTC --after 2026-01-03T23:58:00Z --count 2`
    fires = next_fires(parse_schedule("* * * * 6/1"), z("2026-01-03T23:58:00"), 2)
    # Then the second fire is the next Saturday's first minute, not Sunday 2026-01-04 00:00
    assert [f.at for f in fires] == [z("2026-01-03T23:59:00"), z("2026-01-10T00:00:00")]


def _before_last(year: int, month: int, n: int) -> int | None:
    """The oracle for Quartz's 'L-n': the month's last day minus n, if that is a day of the month."""
    import calendar

    day = calendar.monthrange(year, month)[1] - n
    return day if day >= 1 else None


@pytest.mark.parametrize(
    "expression", ["0 9 L-3 * *", "cron(0 9 L-3 * ? *)", "0 9 L-30 * *", "0 9 L-28 FEB *"]
)
def test_l_minus_n_fires_n_days_before_the_last_day_of_each_month_that_has_it(expression):
    # Given Quartz's 'L-n' (n days before the month's last day) in UTC
    n = int(expression.split()[2].removeprefix("cron(").split("-")[1])
    months = [2] if "FEB" in expression else list(range(1, 13))
    # When five years of fires are computed
    fires = fires_between(parse_schedule(expression), z("2026-01-01T00:00:00"), z("2031-01-01T00:00:00"), 200)
    # Then there is one fire per month that has the day, at 09:00 on it, and none in the others
    expected = [
        datetime(year, month, day, 9, tzinfo=UTC)
        for year in range(2026, 2031)
        for month in months
        if (day := _before_last(year, month, n)) is not None
    ]
    assert [f.at for f in fires] == expected and expected
