"""Nearest weekday: ``nW`` and ``LW`` in day-of-month (decision 0008, docs/semantics/time.md).

``nW`` fires on the weekday (Mon-Fri) nearest to day n *of the same month*, never crossing into
another month; a month that has no day n has no such weekday, so it has no fire (as a plain ``n``).
``LW`` is the last weekday of the month. Expected fires are written by hand from the calendar.
"""

from __future__ import annotations

from calendar import monthrange
from datetime import UTC, date, datetime

import pytest

from jobsched.core.schedules import parse_schedule
from jobsched.core.timeline import fires_between, nearest_weekday

S, F, B = "dst_gap_shifted", "dst_overlap_first", "dst_overlap_second"
NY, SYD, JLM, CAI = "America/New_York", "Australia/Sydney", "Asia/Jerusalem", "Africa/Cairo"


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (expression, zone, after (UTC), until (UTC), [expected fires as local ISO 8601 with offset])
# Weekdays used: 2026 - Jan 31 Sat, Feb 28 Sat, Mar 29 Sun, May 30 Sat, May 31 Sun, Aug 1 Sat,
# Aug 30 Sun, Oct 31 Sat (Jun/Sep/Nov have 30 days); 2027 - Jan 30 Sat, Feb 28 Sun; 2028 - Jan 30 Sun,
# Feb 29 Tue; 2100 is not a leap year; 2104 - Feb 29 Fri.
TABLE = [
    # the reproduction: June, September and November have no 31st, so no fire
    (
        "cron(0 18 31W * ? *)",
        "UTC",
        "2026-05-01T00:00",
        "2026-12-31T23:59",
        [
            "2026-05-29T18:00:00+00:00",  # 31 May is a Sunday, the last day: Friday 29th
            "2026-07-31T18:00:00+00:00",
            "2026-08-31T18:00:00+00:00",
            "2026-10-30T18:00:00+00:00",  # 31 Oct is a Saturday: Friday 30th
            "2026-12-31T18:00:00+00:00",
        ],
    ),
    # ... exactly the months a plain 31 fires in
    (
        "cron(0 18 31 * ? *)",
        "UTC",
        "2026-05-01T00:00",
        "2026-12-31T23:59",
        [
            "2026-05-31T18:00:00+00:00",
            "2026-07-31T18:00:00+00:00",
            "2026-08-31T18:00:00+00:00",
            "2026-10-31T18:00:00+00:00",
            "2026-12-31T18:00:00+00:00",
        ],
    ),
    # a fire exactly at `after` is excluded; the next month with a 31st is July
    ("0 18 31W * *", "UTC", "2026-05-29T18:00", "2026-07-31T18:00", ["2026-07-31T18:00:00+00:00"]),
    # 30W: no fire in February (and `30W FEB` is rejected: it never fires); 30 May is a Saturday, 30 Aug
    # a Sunday (not the last day)
    (
        "0 18 30W * *",
        "UTC",
        "2026-01-01T00:00",
        "2026-06-01T00:00",
        [
            "2026-01-30T18:00:00+00:00",
            "2026-03-30T18:00:00+00:00",
            "2026-04-30T18:00:00+00:00",
            "2026-05-29T18:00:00+00:00",
        ],
    ),
    ("0 18 30W * *", "UTC", "2026-08-01T00:00", "2026-09-01T00:00", ["2026-08-31T18:00:00+00:00"]),
    # ... nor in a leap February; 30 Jan 2028 is a Sunday (not the last day): Monday 31st
    (
        "0 18 30W * *",
        "UTC",
        "2028-01-15T00:00",
        "2028-03-31T00:00",
        ["2028-01-31T18:00:00+00:00", "2028-03-30T18:00:00+00:00"],
    ),
    # 29W: no fire in a non-leap February; 29 Mar 2026 is a Sunday: Monday 30th
    (
        "0 18 29W * *",
        "UTC",
        "2026-01-01T00:00",
        "2026-04-01T00:00",
        ["2026-01-29T18:00:00+00:00", "2026-03-30T18:00:00+00:00"],
    ),
    # the second reproduction: only 2028 of 2026-2030 has a 29 February, then it ends
    (
        "cron(30 8 29W FEB ? 2026-2030)",
        "UTC",
        "2026-01-01T00:00",
        "2031-01-01T00:00",
        ["2028-02-29T08:30:00+00:00"],
    ),
    # 2100 is not a leap year (century rule): from 2096 the next 29 February is in 2104
    ("cron(0 18 29W FEB ? *)", "UTC", "2096-03-01T00:00", "2104-03-01T00:00", ["2104-02-29T18:00:00+00:00"]),
    # 28W in February: 28 Feb 2026 is a Saturday (Friday 27th), 28 Feb 2027 a Sunday and the last day
    # (Friday 26th, the weekday never crosses into March), 28 Feb 2028 a Monday
    (
        "0 18 28W 2 *",
        "UTC",
        "2026-01-01T00:00",
        "2029-01-01T00:00",
        ["2026-02-27T18:00:00+00:00", "2027-02-26T18:00:00+00:00", "2028-02-28T18:00:00+00:00"],
    ),
    # 1W: 1 Aug 2026 is a Saturday: Monday 3rd (not Friday 31 July)
    (
        "0 18 1W * *",
        "UTC",
        "2026-07-15T00:00",
        "2026-09-15T00:00",
        ["2026-08-03T18:00:00+00:00", "2026-09-01T18:00:00+00:00"],
    ),
    # LW: the last weekday of the month
    (
        "cron(0 18 LW * ? *)",
        "UTC",
        "2026-01-01T00:00",
        "2026-06-01T00:00",
        [
            "2026-01-30T18:00:00+00:00",  # 31 Jan is a Saturday
            "2026-02-27T18:00:00+00:00",  # 28 Feb is a Saturday
            "2026-03-31T18:00:00+00:00",
            "2026-04-30T18:00:00+00:00",
            "2026-05-29T18:00:00+00:00",  # 31 May is a Sunday
        ],
    ),
    (
        "0 18 LW 2 *",
        "UTC",
        "2027-01-01T00:00",
        "2029-01-01T00:00",
        ["2027-02-26T18:00:00+00:00", "2028-02-29T18:00:00+00:00"],  # 28 Feb 2027 Sunday; 2028 leap
    ),
    # a zone with DST: the day is the local day and the offset follows the season (EST/EDT)
    (
        "cron(0 18 31W * ? *)",
        NY,
        "2026-01-01T00:00",
        "2026-12-01T00:00",
        [
            "2026-01-30T18:00:00-05:00",
            "2026-03-31T18:00:00-04:00",
            "2026-05-29T18:00:00-04:00",
            "2026-07-31T18:00:00-04:00",
            "2026-08-31T18:00:00-04:00",
            "2026-10-30T18:00:00-04:00",
        ],
    ),
    (
        "0 9 30W * *",
        NY,
        "2026-10-01T00:00",
        "2027-04-01T00:00",
        [
            "2026-10-30T09:00:00-04:00",
            "2026-11-30T09:00:00-05:00",
            "2026-12-30T09:00:00-05:00",
            "2027-01-29T09:00:00-05:00",  # 30 Jan 2027 is a Saturday; no fire in February
            "2027-03-30T09:00:00-04:00",
        ],
    ),
    # Sydney: 29 Feb 2028 08:30 local is still 28 Feb in UTC; 2027 has no 29 February
    ("30 8 29W 2 *", SYD, "2027-01-01T00:00", "2029-01-01T00:00", ["2028-02-29T08:30:00+11:00"]),
    (
        "30 8 LW 2 *",
        SYD,
        "2027-01-01T00:00",
        "2028-12-31T00:00",
        ["2027-02-26T08:30:00+11:00", "2028-02-29T08:30:00+11:00"],
    ),
]


def _ids(rows):
    return [f"{r[0]}|{r[1]}|{r[2]}" for r in rows]


@pytest.mark.parametrize(("expression", "zone", "after", "until", "expected"), TABLE, ids=_ids(TABLE))
def test_nearest_weekday_fires_on_the_weekday_of_the_same_month(expression, zone, after, until, expected):
    # Given a W (or LW) schedule / When its fires in a window are listed
    fires = fires_between(parse_schedule(expression, zone), z(after), z(until), limit=100)
    # Then they are the hand-computed local times, and months without day n have none
    assert [f.local.isoformat() for f in fires] == expected
    assert [f.at for f in fires] == [datetime.fromisoformat(e) for e in expected]


# (expression, zone, after (UTC), dst_gap, dst_overlap, [(expected UTC, note), ...]) for W days on
# transition days. Jerusalem springs forward on Fridays (27 Mar 2026 and 26 Mar 2027, 02:00 -> 03:00
# local, 00:00Z); 27 Mar 2027 is a Saturday, so 27W moves to Friday 26th, the transition day again.
# Cairo falls back on Thursday 29 Oct 2026 (24:00 EEST -> 23:00 EET).
ON_TRANSITIONS = [
    (
        "cron(30 2 27W MAR ? *)",
        JLM,
        "2026-01-01T00:00",
        "shift",
        "first",
        [("2026-03-27T00:00", S), ("2027-03-26T00:00", S), ("2028-03-26T23:30", None)],
    ),
    (
        "cron(30 2 27W MAR ? *)",
        JLM,
        "2026-01-01T00:00",
        "skip",
        "first",
        [("2028-03-26T23:30", None), ("2029-03-26T23:30", None)],
    ),
    (
        "cron(30 23 29W OCT ? *)",
        CAI,
        "2026-10-01T00:00",
        "shift",
        "first",
        [("2026-10-29T20:30", F), ("2027-10-29T21:30", None)],
    ),
    (
        "cron(30 23 29W OCT ? *)",
        CAI,
        "2026-10-01T00:00",
        "shift",
        "both",
        [("2026-10-29T20:30", F), ("2026-10-29T21:30", B), ("2027-10-29T21:30", None)],
    ),
]


@pytest.mark.parametrize(
    ("expression", "zone", "after", "gap", "overlap", "expected"),
    ON_TRANSITIONS,
    ids=[f"{r[0]}|{r[1]}|{r[3]}/{r[4]}" for r in ON_TRANSITIONS],
)
def test_nearest_weekday_on_a_transition_day_follows_the_dst_policy(
    expression, zone, after, gap, overlap, expected
):
    schedule = parse_schedule(expression, zone, dst_gap=gap, dst_overlap=overlap)
    fires = fires_between(schedule, z(after), z("2029-12-31T00:00"), limit=len(expected))
    assert [(f.at, f.note) for f in fires] == [(z(at), note) for at, note in expected]


def _oracle(year: int, month: int, n: int | str) -> int | None:
    """Independent of the rule as coded: the Mon-Fri day of that month closest to day n (no ties can
    occur), or None when the month has no day n. ``n == "L"`` is the month's last day."""
    last = monthrange(year, month)[1]
    target = last if n == "L" else n
    if target > last:
        return None
    weekdays = [d for d in range(1, last + 1) if date(year, month, d).weekday() < 5]
    return min(weekdays, key=lambda d: abs(d - target))


@pytest.mark.parametrize("n", [*range(1, 32), "L"])
def test_every_nearest_weekday_agrees_with_the_closest_weekday_of_the_month(n):
    # Given nW (or LW) at noon in UTC
    schedule = parse_schedule(f"0 12 {n}W * *")
    for year in (2026, 2027, 2028, 2029, 2100):
        # When a year's fires are listed
        fires = fires_between(
            schedule, datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), 20
        )
        # Then there is one per month that has day n, on the closest weekday of that month
        expected = [(year, m, d) for m in range(1, 13) if (d := _oracle(year, m, n)) is not None]
        assert [(f.at.year, f.at.month, f.at.day) for f in fires] == expected
        assert [nearest_weekday(y, m, n) for y, m, _ in expected] == [d for _, _, d in expected]
