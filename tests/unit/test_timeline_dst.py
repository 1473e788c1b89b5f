"""Fires around real DST transitions (2026 and 2027) in four zones, for both policies.

Expected instants are written by hand from the zones' transitions (tzdata):
New York 02:00->03:00 and 02:00->01:00; London 01:00->02:00 and 02:00->01:00; Lord Howe shifts by
30 minutes (02:00->02:30, 02:00->01:30); Santiago changes at midnight (00:00->01:00, 24:00->23:00).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobsched.core.schedules import parse_schedule
from jobsched.core.timeline import next_fires

S, F, B = "dst_gap_shifted", "dst_overlap_first", "dst_overlap_second"
NY, LON, LHI, SCL = "America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Santiago"


def z(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (expression, zone, after (UTC), dst_gap, dst_overlap, [(expected UTC, note), ...])
WALL_CLOCK = [
    # New York 2026: spring forward 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z)
    (
        "30 2 * * *",
        NY,
        "2026-03-07T12:00",
        "shift",
        "first",
        [("2026-03-08T07:00", S), ("2026-03-09T06:30", None)],
    ),
    (
        "30 2 * * *",
        NY,
        "2026-03-07T12:00",
        "skip",
        "first",
        [("2026-03-09T06:30", None), ("2026-03-10T06:30", None)],
    ),
    # New York 2026: fall back 2026-11-01 02:00 EDT -> 01:00 EST
    (
        "30 1 * * *",
        NY,
        "2026-10-31T12:00",
        "shift",
        "first",
        [("2026-11-01T05:30", F), ("2026-11-02T06:30", None)],
    ),
    (
        "30 1 * * *",
        NY,
        "2026-10-31T12:00",
        "shift",
        "both",
        [("2026-11-01T05:30", F), ("2026-11-01T06:30", B), ("2026-11-02T06:30", None)],
    ),
    # New York 2027: two occurrences in one gap collapse into one fire
    (
        "0,30 2 * * *",
        NY,
        "2027-03-13T12:00",
        "shift",
        "first",
        [("2027-03-14T07:00", S), ("2027-03-15T06:00", None), ("2027-03-15T06:30", None)],
    ),
    (
        "0,30 2 * * *",
        NY,
        "2027-03-13T12:00",
        "skip",
        "first",
        [("2027-03-15T06:00", None), ("2027-03-15T06:30", None), ("2027-03-16T06:00", None)],
    ),
    (
        "15 1 * * 0",
        NY,
        "2027-11-06T00:00",
        "shift",
        "first",
        [("2027-11-07T05:15", F), ("2027-11-14T06:15", None)],
    ),
    (
        "15 1 * * 0",
        NY,
        "2027-11-06T00:00",
        "shift",
        "both",
        [("2027-11-07T05:15", F), ("2027-11-07T06:15", B), ("2027-11-14T06:15", None)],
    ),
    # London 2026: 2026-03-29 01:00 GMT -> 02:00 BST (01:00Z); 2026-10-25 02:00 BST -> 01:00 GMT
    (
        "30 1 * * *",
        LON,
        "2026-03-28T12:00",
        "shift",
        "first",
        [("2026-03-29T01:00", S), ("2026-03-30T00:30", None)],
    ),
    (
        "30 1 * * *",
        LON,
        "2026-03-28T12:00",
        "skip",
        "first",
        [("2026-03-30T00:30", None), ("2026-03-31T00:30", None)],
    ),
    (
        "30 1 * * *",
        LON,
        "2026-10-24T12:00",
        "shift",
        "first",
        [("2026-10-25T00:30", F), ("2026-10-26T01:30", None)],
    ),
    (
        "30 1 * * *",
        LON,
        "2026-10-24T12:00",
        "shift",
        "both",
        [("2026-10-25T00:30", F), ("2026-10-25T01:30", B), ("2026-10-26T01:30", None)],
    ),
    # London 2027: 01:00 itself is the first non-existent minute
    (
        "0 1 * * 0",
        LON,
        "2027-03-27T00:00",
        "shift",
        "first",
        [("2027-03-28T01:00", S), ("2027-04-04T00:00", None)],
    ),
    (
        "0 1 * * 0",
        LON,
        "2027-03-27T00:00",
        "skip",
        "first",
        [("2027-04-04T00:00", None), ("2027-04-11T00:00", None)],
    ),
    (
        "59 1 * * 0",
        LON,
        "2027-10-30T00:00",
        "shift",
        "first",
        [("2027-10-31T00:59", F), ("2027-11-07T01:59", None)],
    ),
    (
        "59 1 * * 0",
        LON,
        "2027-10-30T00:00",
        "shift",
        "both",
        [("2027-10-31T00:59", F), ("2027-10-31T01:59", B), ("2027-11-07T01:59", None)],
    ),
    # Lord Howe 2026: 30-minute shifts. 2026-10-04 02:00 -> 02:30 (+10:30 -> +11); 2026-04-05 02:00 -> 01:30
    (
        "15 2 * * *",
        LHI,
        "2026-10-03T00:00",
        "shift",
        "first",
        [("2026-10-03T15:30", S), ("2026-10-04T15:15", None)],
    ),
    (
        "15 2 * * *",
        LHI,
        "2026-10-03T00:00",
        "skip",
        "first",
        [("2026-10-04T15:15", None), ("2026-10-05T15:15", None)],
    ),
    (
        "45 1 * * *",
        LHI,
        "2026-04-04T00:00",
        "shift",
        "first",
        [("2026-04-04T14:45", F), ("2026-04-05T15:15", None)],
    ),
    (
        "45 1 * * *",
        LHI,
        "2026-04-04T00:00",
        "shift",
        "both",
        [("2026-04-04T14:45", F), ("2026-04-04T15:15", B), ("2026-04-05T15:15", None)],
    ),
    # Lord Howe 2027: 2027-10-03 02:00 -> 02:30; 2027-04-04 02:00 -> 01:30
    (
        "0 2 * * *",
        LHI,
        "2027-10-02T00:00",
        "shift",
        "first",
        [("2027-10-02T15:30", S), ("2027-10-03T15:00", None)],
    ),
    (
        "0 2 * * *",
        LHI,
        "2027-10-02T00:00",
        "skip",
        "first",
        [("2027-10-03T15:00", None), ("2027-10-04T15:00", None)],
    ),
    (
        "30 1 * * *",
        LHI,
        "2027-04-03T00:00",
        "shift",
        "first",
        [("2027-04-03T14:30", F), ("2027-04-04T15:00", None)],
    ),
    (
        "30 1 * * *",
        LHI,
        "2027-04-03T00:00",
        "shift",
        "both",
        [("2027-04-03T14:30", F), ("2027-04-03T15:00", B), ("2027-04-04T15:00", None)],
    ),
    # Santiago 2026: midnight does not exist on 2026-09-06; 23:xx happens twice on 2026-04-04
    (
        "0 0 * * *",
        SCL,
        "2026-09-05T12:00",
        "shift",
        "first",
        [("2026-09-06T04:00", S), ("2026-09-07T03:00", None)],
    ),
    (
        "0 0 * * *",
        SCL,
        "2026-09-05T12:00",
        "skip",
        "first",
        [("2026-09-07T03:00", None), ("2026-09-08T03:00", None)],
    ),
    (
        "30 23 * * *",
        SCL,
        "2026-04-04T12:00",
        "shift",
        "first",
        [("2026-04-05T02:30", F), ("2026-04-06T03:30", None)],
    ),
    (
        "30 23 * * *",
        SCL,
        "2026-04-04T12:00",
        "shift",
        "both",
        [("2026-04-05T02:30", F), ("2026-04-05T03:30", B), ("2026-04-06T03:30", None)],
    ),
    # Santiago 2027: 2027-09-05 00:00 -> 01:00; 2027-04-03 24:00 -> 23:00 (a Saturday)
    (
        "30 0 * * *",
        SCL,
        "2027-09-04T12:00",
        "shift",
        "first",
        [("2027-09-05T04:00", S), ("2027-09-06T03:30", None)],
    ),
    (
        "30 0 * * *",
        SCL,
        "2027-09-04T12:00",
        "skip",
        "first",
        [("2027-09-06T03:30", None), ("2027-09-07T03:30", None)],
    ),
    (
        "0 23 * * 6",
        SCL,
        "2027-04-03T00:00",
        "shift",
        "first",
        [("2027-04-04T02:00", F), ("2027-04-11T03:00", None)],
    ),
    (
        "0 23 * * 6",
        SCL,
        "2027-04-03T00:00",
        "shift",
        "both",
        [("2027-04-04T02:00", F), ("2027-04-04T03:00", B), ("2027-04-11T03:00", None)],
    ),
    # The other forms follow the same policy: seconds field, EventBridge cron(...), at()
    (
        "0 30 2 * * *",
        NY,
        "2026-03-07T12:00",
        "shift",
        "first",
        [("2026-03-08T07:00", S), ("2026-03-09T06:30", None)],
    ),
    (
        "cron(30 1 ? * SUN *)",
        NY,
        "2026-10-31T12:00",
        "shift",
        "both",
        [("2026-11-01T05:30", F), ("2026-11-01T06:30", B), ("2026-11-08T06:30", None)],
    ),
    ("at(2026-03-08T02:30:00)", NY, "2026-01-01T00:00", "shift", "first", [("2026-03-08T07:00", S)]),
    ("at(2026-03-08T02:30:00)", NY, "2026-01-01T00:00", "skip", "first", []),
    ("at(2026-11-01T01:30:00)", NY, "2026-01-01T00:00", "shift", "first", [("2026-11-01T05:30", F)]),
    (
        "at(2026-11-01T01:30:00)",
        NY,
        "2026-01-01T00:00",
        "shift",
        "both",
        [("2026-11-01T05:30", F), ("2026-11-01T06:30", B)],
    ),
]

# Interval-like schedules follow elapsed time; the same rows hold under every policy combination.
INTERVAL_LIKE = [
    (
        "*/15 * * * *",
        NY,
        "2026-03-08T06:30",
        [
            ("2026-03-08T06:45", None),
            ("2026-03-08T07:00", None),
            ("2026-03-08T07:15", None),
            ("2026-03-08T07:30", None),
        ],
    ),
    (
        "*/30 * * * *",
        NY,
        "2026-11-01T04:45",
        [
            ("2026-11-01T05:00", F),
            ("2026-11-01T05:30", F),
            ("2026-11-01T06:00", B),
            ("2026-11-01T06:30", B),
            ("2026-11-01T07:00", None),
            ("2026-11-01T07:30", None),
        ],
    ),
    (
        "*/30 * * * *",
        LON,
        "2026-03-29T00:00",
        [("2026-03-29T00:30", None), ("2026-03-29T01:00", None), ("2026-03-29T01:30", None)],
    ),
    ("0 * * * *", LHI, "2026-10-03T14:00", [("2026-10-03T14:30", None), ("2026-10-03T16:00", None)]),
    (
        "45 * * * *",
        LHI,
        "2026-04-04T13:30",
        [
            ("2026-04-04T13:45", None),
            ("2026-04-04T14:45", F),
            ("2026-04-04T15:15", B),
            ("2026-04-04T16:15", None),
        ],
    ),
    (
        "0 * * * *",
        SCL,
        "2026-09-06T02:30",
        [("2026-09-06T03:00", None), ("2026-09-06T04:00", None), ("2026-09-06T05:00", None)],
    ),
    (
        "@hourly",
        SCL,
        "2027-04-04T01:30",
        [("2027-04-04T02:00", F), ("2027-04-04T03:00", B), ("2027-04-04T04:00", None)],
    ),
]


def _ids(rows):
    return [f"{r[0]}|{r[1]}|{r[2]}|{r[3]}/{r[4]}" if len(r) == 6 else f"{r[0]}|{r[1]}|{r[2]}" for r in rows]


@pytest.mark.parametrize(
    ("expression", "zone", "after", "gap", "overlap", "expected"), WALL_CLOCK, ids=_ids(WALL_CLOCK)
)
def test_wall_clock_schedule_follows_dst_policy(expression, zone, after, gap, overlap, expected):
    # Given a wall-clock schedule and a transition inside the window
    schedule = parse_schedule(expression, zone, dst_gap=gap, dst_overlap=overlap)
    assert schedule.wall_clock
    # When the next fires are computed (at() is finite, so an empty expectation asks for one)
    fires = next_fires(schedule, z(after), len(expected) or 1)
    # Then they are the hand-computed instants with their DST notes
    assert [(f.at, f.note) for f in fires] == [(z(at), note) for at, note in expected]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), INTERVAL_LIKE, ids=_ids(INTERVAL_LIKE))
@pytest.mark.parametrize(("gap", "overlap"), [("shift", "first"), ("skip", "both")])
def test_interval_like_schedule_follows_elapsed_time(expression, zone, after, expected, gap, overlap):
    # Given an interval-like schedule (minute or hour field starts with '*'), under either policy
    schedule = parse_schedule(expression, zone, dst_gap=gap, dst_overlap=overlap)
    assert not schedule.wall_clock
    # When the next fires around a transition are computed
    fires = next_fires(schedule, z(after), len(expected))
    # Then non-existent local times are not fired and repeated ones fire in both folds
    assert [(f.at, f.note) for f in fires] == [(z(at), note) for at, note in expected]


def test_fire_local_time_carries_the_fold_of_the_second_occurrence():
    # Given 01:30 daily in New York with both overlap fires
    schedule = parse_schedule("30 1 * * *", NY, dst_overlap="both")
    # When the fires on the fall-back day are computed
    first, second = next_fires(schedule, z("2026-10-31T12:00"), 2)
    # Then both show 01:30 local, with EDT then EST offsets
    assert first.local.isoformat() == "2026-11-01T01:30:00-04:00"
    assert second.local.isoformat() == "2026-11-01T01:30:00-05:00"


def test_shifted_fire_local_time_is_the_end_of_the_gap():
    # Given 02:10 daily in Lord Howe, whose spring-forward gap is 02:00-02:30
    schedule = parse_schedule("10 2 * * *", LHI)
    # When the fire on the spring-forward day is computed
    (fire,) = next_fires(schedule, z("2026-10-03T12:00"), 1)
    # Then it is at the first local instant after the gap
    assert fire.local.isoformat() == "2026-10-04T02:30:00+11:00"
    assert fire.note == S
