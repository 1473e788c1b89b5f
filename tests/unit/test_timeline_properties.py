"""Property-based tests of the timeline against independent oracles.

* A brute-force oracle: scan every UTC minute of a window, see which local wall times exist, exist
  twice or not at all, and apply DESIGN.md §3 directly. No croniter, no bisection.
* cronsim (a separate cron implementation) for expressions in UTC, where DST plays no part.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsched.core.schedules import parse_schedule
from jobsched.core.timeline import fires_between, next_fires

ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Kolkata",
    "UTC",
]
# UTC instants of the 2026/2027 transitions of the zones above (and one calm day per year)
TRANSITIONS = [
    datetime(2026, 3, 8, 7, tzinfo=UTC),
    datetime(2026, 11, 1, 6, tzinfo=UTC),
    datetime(2027, 3, 14, 7, tzinfo=UTC),
    datetime(2027, 11, 7, 6, tzinfo=UTC),
    datetime(2026, 3, 29, 1, tzinfo=UTC),
    datetime(2026, 10, 25, 1, tzinfo=UTC),
    datetime(2027, 3, 28, 1, tzinfo=UTC),
    datetime(2027, 10, 31, 1, tzinfo=UTC),
    datetime(2026, 4, 4, 15, tzinfo=UTC),
    datetime(2026, 10, 3, 15, 30, tzinfo=UTC),
    datetime(2027, 4, 3, 15, tzinfo=UTC),
    datetime(2027, 10, 2, 15, 30, tzinfo=UTC),
    datetime(2026, 4, 5, 3, tzinfo=UTC),
    datetime(2026, 9, 6, 4, tzinfo=UTC),
    datetime(2027, 4, 4, 3, tzinfo=UTC),
    datetime(2027, 9, 5, 4, tzinfo=UTC),
    datetime(2026, 6, 15, 12, tzinfo=UTC),
    datetime(2027, 1, 15, 12, tzinfo=UTC),
]
MINUTE = timedelta(minutes=1)


def _field(low: int, high: int, *, star_weight: int = 1, min_span: int = 0):
    """(text, allowed values) of one cron field, in the plain syntax both sides understand.

    ``min_span=1`` avoids one-value ranges like '5-5', which cronsim (like croniter) reads as the
    whole field; we follow Vixie cron there (just 5), which the brute-force oracle checks.
    """
    star = st.just(("*", set(range(low, high + 1))))
    step = st.integers(2, max(2, (high - low) // 2)).map(lambda k: (f"*/{k}", set(range(low, high + 1, k))))
    values = st.lists(st.integers(low, high), min_size=1, max_size=4, unique=True).map(
        lambda vs: (",".join(map(str, vs)), set(vs))
    )
    span = st.tuples(
        st.integers(low, high - min_span), st.integers(min_span, high - low), st.integers(1, 5)
    ).map(
        lambda t: (
            f"{t[0]}-{min(high, t[0] + t[1])}/{t[2]}",
            set(range(t[0], min(high, t[0] + t[1]) + 1, t[2])),
        )
    )
    return st.one_of([star] * star_weight + [step, values, span])


@st.composite
def expressions(draw):
    """A 5-field cron expression and a matcher built from the same drawn sets (not from the text)."""
    minute, hour = draw(_field(0, 59)), draw(_field(0, 23))
    dom = draw(_field(1, 31))
    dow = draw(_field(0, 6))
    text = f"{minute[0]} {hour[0]} {dom[0]} * {dow[0]}"
    day_or = not (dom[0].startswith("*") or dow[0].startswith("*"))

    def matches(wall: datetime) -> bool:
        day_ok = (wall.day in dom[1], (wall.isoweekday() % 7) in dow[1])
        return wall.minute in minute[1] and wall.hour in hour[1] and (any(day_ok) if day_or else all(day_ok))

    return text, matches


def oracle(
    matches, zone: ZoneInfo, after: datetime, until: datetime, wall_clock: bool, gap: str, overlap: str
):
    """Fires in (after, until] by brute force over UTC minutes (DESIGN.md §3 read literally)."""
    instants: dict[datetime, list[datetime]] = {}
    gap_end: dict[datetime, datetime] = {}
    u = after - timedelta(hours=3)
    previous = None
    while u <= until + timedelta(hours=3):
        wall = u.astimezone(zone).replace(tzinfo=None)
        instants.setdefault(wall, []).append(u)
        if previous is not None and wall - previous > MINUTE:
            missing = previous + MINUTE
            while missing < wall:
                gap_end[missing] = u  # the first instant after the gap
                missing += MINUTE
        previous = wall
        u += MINUTE
    out = []
    walls = sorted(set(instants) | set(gap_end))
    for order, wall in enumerate(walls):
        if not matches(wall):
            continue
        found = instants.get(wall, [])
        if len(found) == 1:
            out.append((found[0], order, None))
        elif len(found) == 2:
            out.append((found[0], order, "dst_overlap_first"))
            if not wall_clock or overlap == "both":
                out.append((found[1], order, "dst_overlap_second"))
        elif wall_clock and gap == "shift":
            out.append((gap_end[wall], order, "dst_gap_shifted"))
    result, seen = [], set()
    for at, _, note in sorted(out):
        if after < at <= until and at not in seen:
            seen.add(at)
            result.append((at, note))
    return result


near_transition = st.tuples(st.sampled_from(TRANSITIONS), st.integers(-36 * 60, 36 * 60)).map(
    lambda t: t[0] + timedelta(minutes=t[1])
)


@settings(max_examples=150, deadline=None)
@given(
    expr=expressions(),
    zone=st.sampled_from(ZONES),
    after=near_transition,
    gap=st.sampled_from(["shift", "skip"]),
    overlap=st.sampled_from(["first", "both"]),
)
def test_fires_equal_brute_force_oracle(expr, zone, after, gap, overlap):
    # Given any expression, zone, policy and an instant near a transition
    text, matches = expr
    schedule = parse_schedule(text, zone, dst_gap=gap, dst_overlap=overlap)
    until = after + timedelta(hours=30)
    # When the fires of the next 30 hours are computed
    fires = fires_between(schedule, after, until, limit=10_000)
    # Then they are exactly the brute-force oracle's
    expected = oracle(matches, ZoneInfo(zone), after, until, schedule.wall_clock, gap, overlap)
    assert [(f.at, f.note) for f in fires] == expected


@settings(max_examples=150, deadline=None)
@given(expr=expressions(), zone=st.sampled_from(ZONES), after=near_transition)
def test_fires_strictly_increase_and_match_in_local_time(expr, zone, after):
    # Given any expression with the widest policy (every overlap fires twice)
    text, matches = expr
    schedule = parse_schedule(text, zone, dst_overlap="both")
    # When 40 fires are computed
    fires = next_fires(schedule, after, 40)
    # Then they strictly increase, start after `after`, and every unshifted one matches locally
    instants = [f.at for f in fires]
    assert instants == sorted(set(instants)) and instants[0] > after
    assert all(matches(f.local.replace(tzinfo=None)) for f in fires if f.note != "dst_gap_shifted")
    assert all(f.local.astimezone(UTC) == f.at for f in fires)


calm = st.tuples(st.integers(2026, 2027), st.sampled_from([1, 6, 7, 8, 12]), st.integers(2, 20)).map(
    lambda t: datetime(t[0], t[1], t[2], tzinfo=UTC)
)


@settings(max_examples=80, deadline=None)
@given(expr=expressions(), zone=st.sampled_from(ZONES), after=calm)
def test_policies_agree_away_from_transitions(expr, zone, after):
    # Given a window of two days that contains no DST transition in any of the zones
    text, _ = expr
    until = after + timedelta(days=2)
    default = parse_schedule(text, zone)
    other = parse_schedule(text, zone, dst_gap="skip", dst_overlap="both")
    # When both policies compute the fires
    # Then they agree exactly, and no fire carries a DST note
    fires = fires_between(default, after, until, limit=20_000)
    assert fires == fires_between(other, after, until, limit=20_000)
    assert all(f.note is None for f in fires)


@st.composite
def utc_expressions(draw):
    """Richer syntax for the cronsim comparison: names, L, '#', ranges, steps; ours in croniter dialect."""
    minute = draw(_field(0, 59, min_span=1))[0]
    hour = draw(_field(0, 23, min_span=1))[0]
    dom = draw(st.sampled_from(["*", "1", "15", "L", "1-10", "*/3", "10,20,28"]))
    month = draw(st.sampled_from(["*", "JAN", "2-4", "*/2", "6,12"]))
    ours, theirs = draw(
        st.sampled_from(
            [("*", "*"), ("MON", "MON"), ("1-5", "1-5"), ("5#3", "5#3"), ("L5", "5L"), ("0,6", "0,6")]
        )
    )
    if dom != "*" and (ours != "*" or dom == "L") and ("L" in dom + ours or "#" in ours):
        ours = theirs = "*"  # L/# need the other day field unrestricted (a ValidationError otherwise)
    return f"{minute} {hour} {dom} {month} {ours}", f"{minute} {hour} {dom} {month} {theirs}"


@settings(max_examples=150, deadline=None)
@given(exprs=utc_expressions(), start=st.datetimes(datetime(2026, 1, 1), datetime(2027, 12, 31)))
def test_utc_fires_agree_with_cronsim(exprs, start):
    # Given an expression in UTC (no DST) and cronsim as an independent implementation
    ours, theirs = exprs
    after = start.replace(microsecond=0, tzinfo=UTC)
    # When both enumerate the next 25 fires
    fires = next_fires(parse_schedule(ours), after, 25)
    sim = CronSim(theirs, after.replace(tzinfo=None))
    expected = [next(sim).replace(tzinfo=UTC) for _ in range(25)]
    # Then they agree
    assert [f.at for f in fires] == expected
