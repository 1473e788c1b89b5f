"""Parsing, classification and validation of schedule expressions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.schedules import EPOCH, parse_schedule

# (expression, kind, wall_clock): DESIGN §3 — wall-clock unless the minute or hour field starts with '*'
CLASSIFIED = [
    ("30 2 * * *", "cron", True),
    ("0 9 * * MON-FRI", "cron", True),
    ("0-59/15 2 * * *", "cron", True),
    ("*/15 * * * *", "cron", False),
    ("0 * * * *", "cron", False),
    ("* 3 * * *", "cron", False),
    ("0 30 2 * * *", "cron", True),
    ("*/10 0 2 * * *", "cron", True),  # seconds field starts with '*', minute and hour do not
    ("@daily", "cron", True),
    ("@hourly", "cron", False),
    ("cron(0 12 * * ? *)", "cron", True),
    ("cron(0/15 * * * ? *)", "cron", False),
    ("rate(5 minutes)", "rate", False),
    ("at(2026-12-01T09:00:00)", "at", True),
]


@pytest.mark.parametrize(("expression", "kind", "wall_clock"), CLASSIFIED)
def test_expression_is_classified(expression, kind, wall_clock):
    # Given a valid expression / When it is parsed
    schedule = parse_schedule(expression)
    # Then its kind and DST classification follow DESIGN §3
    assert (schedule.kind, schedule.wall_clock) == (kind, wall_clock)


@pytest.mark.parametrize(
    ("macro", "equivalent"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@HOURLY", "0 * * * *"),
    ],
)
def test_macro_means_its_cron_expression(macro, equivalent):
    # Given a macro / When parsed / Then it matches like the 5-field expression it stands for
    assert parse_schedule(macro).cron == parse_schedule(equivalent).cron


@pytest.mark.parametrize(
    ("aws", "unix"),
    [
        ("cron(0 12 ? * MON-FRI *)", "0 12 * * 1-5"),
        ("cron(0 12 ? * 2-6 *)", "0 12 * * 1-5"),  # EventBridge counts 1 = Sunday
        ("cron(0 12 ? * 6#3 *)", "0 12 * * 5#3"),
        ("cron(0 12 ? * 6L *)", "0 12 * * L5"),
        ("cron(0 12 L * ? *)", "0 12 L * *"),
        ("cron(0 12 15W * ? *)", "0 12 15W * *"),
        ("cron(0 12 LW * ? *)", "0 12 LW * *"),
        ("cron(0/20 8-10 ? JAN,JUL SUN *)", "0,20,40 8-10 * 1,7 0"),
    ],
)
def test_eventbridge_cron_converts_to_the_same_matching(aws, unix):
    # Given an EventBridge expression and the unix one with the same meaning
    # When both are parsed / Then they match the same wall times
    ours, theirs = parse_schedule(aws), parse_schedule(unix)
    assert (ours.cron, ours.nearest_weekday) == (theirs.cron, theirs.nearest_weekday)


@pytest.mark.parametrize(
    ("expression", "nearest"),
    [
        ("0 12 15W * *", 15),
        ("0 12 1W * *", 1),
        ("0 12 31W * *", 31),
        ("0 12 LW * *", "L"),
        ("0 12 15 * *", None),
    ],
)
def test_nearest_weekday_is_decided_by_the_core_not_croniter(expression, nearest):
    # Given a W (or LW) day-of-month / When parsed
    schedule = parse_schedule(expression)
    # Then the W day is kept for the timeline and croniter is never handed a W
    assert schedule.nearest_weekday == nearest
    assert "W" not in schedule.cron


# (day-of-month, month, year): nW can fire exactly when plain n can, since W never leaves the month
SATISFIABLE = [
    ("31", "*", "*"),
    ("31", "FEB,APR", "*"),
    ("31", "APR,JUN,SEP,NOV", "*"),
    ("30", "FEB", "*"),
    ("29", "FEB", "*"),
    ("29", "FEB", "2027"),
    ("29", "FEB", "2028"),
    ("29", "FEB", "2100"),
    ("29", "FEB", "2097-2103"),
    ("28", "FEB", "2027"),
    ("L", "FEB", "2027"),
]


@pytest.mark.parametrize(("dom", "month", "year"), SATISFIABLE)
def test_nearest_weekday_is_valid_exactly_when_the_plain_day_is(dom, month, year):
    # Given the W form and the plain form of the same day-of-month
    def fires(day: str) -> bool:
        try:
            parse_schedule(f"cron(0 12 {day} {month} ? {year})")
        except ValidationError as exc:
            assert "never fires" in exc.message
            return False
        return True

    # When both are parsed / Then both are accepted or both are rejected as never firing
    assert fires(f"{dom}W") == fires(dom)


def test_eventbridge_year_field_limits_the_years():
    # Given a year range / When parsed / Then the allowed years are listed
    assert parse_schedule("cron(0 0 1 1 ? 2027-2029)").years == (2027, 2028, 2029)
    assert parse_schedule("cron(0 0 1 1 ? 2030/50)").years == (2030, 2080, 2130, 2180)


def test_year_limited_schedule_in_the_past_is_valid():
    # Given a one-year schedule whose year is over / Then it parses (it simply never fires again)
    assert parse_schedule("cron(0 0 1 1 ? 2020)").years == (2020,)


def test_day_rule_is_either_when_both_day_fields_are_restricted():
    # Given both day fields restricted, and one with a '*' step
    both = parse_schedule("0 0 13 * 5")
    starred = parse_schedule("0 0 */2 * 5")
    # Then the first matches either day field, the second both (Vixie cron)
    assert both.day_or and not starred.day_or


def test_rate_defaults_its_anchor_to_the_epoch():
    # Given a rate without an anchor / Then fires are counted from the Unix epoch
    schedule = parse_schedule("rate(1 hour)")
    assert (schedule.rate_seconds, schedule.anchor) == (3600, EPOCH)


def test_rate_keeps_a_given_anchor_in_utc():
    anchor = datetime.fromisoformat("2026-05-01T10:00:07+02:00")
    schedule = parse_schedule("rate(3 days)", anchor=anchor)
    assert (schedule.rate_seconds, schedule.anchor) == (3 * 86400, datetime(2026, 5, 1, 8, 0, 7, tzinfo=UTC))


def test_whitespace_is_normalised():
    assert parse_schedule("  0   9 * *  1 ").expression == "0 9 * * 1"


# (expression, timezone, keyword arguments, fragment of the message)
INVALID = [
    ("30 2 * * 8", "UTC", {}, "day-of-week field '8' is out of range 0-7"),
    ("60 * * * *", "UTC", {}, "minute field '60' is out of range 0-59"),
    ("0 24 * * *", "UTC", {}, "hour field '24' is out of range 0-23"),
    ("0 0 0 * *", "UTC", {}, "day-of-month field '0' is out of range 1-31"),
    ("0 0 * 13 *", "UTC", {}, "month field '13' is out of range 1-12"),
    ("61 0 0 * * *", "UTC", {}, "second field '61' is out of range 0-59"),
    ("0 0 * FOO *", "UTC", {}, "month field 'FOO' is not valid"),
    ("0 0 * * MON-FOO", "UTC", {}, "day-of-week field 'MON-FOO' is not valid"),
    ("*/0 * * * *", "UTC", {}, "step '0' must be a whole number >= 1"),
    ("5-1 * * * *", "UTC", {}, "range '5-1' must not run backwards"),
    ("0 22-2 * * *", "UTC", {}, "for one that wraps around, write the list '22-23,0-2'"),
    ("0 0 * * FRI-MON", "UTC", {}, "write the list 'FRI-7,0-MON'"),
    ("cron(0 0 ? * FRI-MON *)", "UTC", {}, "write the list 'FRI-7,1-MON'"),
    ("*/60 * * * *", "UTC", {}, "minute field '*/60': step '60' is larger than 59"),
    ("0 0 * * */8", "UTC", {}, "day-of-week field '*/8': step '8' is larger than 7"),
    ("0 0 L-0 * *", "UTC", {}, "'L-n' needs n from 1 to 30"),
    ("0 0 L-31 * *", "UTC", {}, "'L-n' needs n from 1 to 30"),
    ("0 0 L-29 FEB *", "UTC", {}, "never fires"),
    ("0 0 L-3 * MON", "UTC", {}, "need the other day field to be '*'"),
    (
        "0 0 1,L-3 * *",
        "UTC",
        {},
        "day-of-month field '1,L-3': '?', 'L', 'L-n', 'W' and '#' cannot be combined",
    ),
    ("0 0 1,L * *", "UTC", {}, "cannot be combined with a list"),
    ("0 0 * * L5,1", "UTC", {}, "day-of-week field 'L5,1': '?', 'L', 'L-n', 'W' and '#' cannot be combined"),
    ("cron(0 0 ? * 6L,2 *)", "UTC", {}, "day-of-week field '6L,2': '?', 'L', 'L-n', 'W' and '#' cannot be"),
    ("0 0 * * 5#3,1", "UTC", {}, "cannot be combined with a list"),
    ("0 0 * *", "UTC", {}, "has 4 fields"),
    ("0 0 1 1 * 2027 x", "UTC", {}, "has 7 fields"),
    ("1,,2 * * * *", "UTC", {}, "empty list item"),
    ("H * * * *", "UTC", {}, "minute field 'H' is not valid"),
    ("0 0 31 2 *", "UTC", {}, "never fires"),
    ("cron(0 0 29 2 ? 2027)", "UTC", {}, "match no date in its years"),
    ("0 0 15 * 5#3", "UTC", {}, "need the other day field to be '*'"),
    ("0 0 * * 1#6", "UTC", {}, "week number after '#' must be 1-5"),
    ("0 0 30W 2 *", "UTC", {}, "never fires"),
    ("cron(0 0 30W FEB ? *)", "UTC", {}, "never fires"),
    ("cron(0 0 31W APR,JUN,SEP,NOV ? *)", "UTC", {}, "never fires"),
    ("cron(0 0 29W FEB ? 2027)", "UTC", {}, "match no date in its years"),
    ("cron(0 0 29W FEB ? 2100)", "UTC", {}, "match no date in its years"),
    ("0 0 LW * 5", "UTC", {}, "need the other day field to be '*'"),
    ("0 0 LW,15 * *", "UTC", {}, "cannot be combined with a list"),
    ("0 0 32W * *", "UTC", {}, "day-of-month field '32' is out of range 1-31"),
    ("? 0 * * *", "UTC", {}, "'?' is only allowed in the day fields"),
    ("@every_minute", "UTC", {}, "macro '@every_minute' is not known"),
    ("cron(0 12 * * * *)", "UTC", {}, "exactly one of day-of-month and day-of-week must be '?'"),
    ("cron(0 12 ? * ? *)", "UTC", {}, "exactly one of day-of-month and day-of-week must be '?'"),
    ("cron(0 12 ? * 0 *)", "UTC", {}, "day-of-week field '0' is out of range 1-7"),
    ("cron(0 12 ? * MON 1969)", "UTC", {}, "year field '1969' is out of range 1970-2199"),
    ("cron(0 12 * *)", "UTC", {}, "use cron(minute hour day-of-month month day-of-week year)"),
    ("rate(0 minutes)", "UTC", {}, "rate value '0' is not valid"),
    ("rate(5 weeks)", "UTC", {}, "rate unit 'weeks' is not allowed"),
    ("rate(five minutes)", "UTC", {}, "rate value 'five' is not valid"),
    ("rate(5)", "UTC", {}, "use rate(N unit)"),
    ("at(2026-02-30T09:00:00)", "UTC", {}, "is not a real date and time"),
    ("at(2026-12-01 09:00)", "UTC", {}, "use at(YYYY-MM-DDThh:mm:ss)"),
    ("", "UTC", {}, "schedule expression is empty"),
    ("0 9 * * *", "Mars/Olympus", {}, "time zone 'Mars/Olympus' is not a known IANA zone"),
    ("0 9 * * *", "../etc/passwd", {}, "is not a known IANA zone"),
    ("0 9 * * *", "", {}, "time zone is empty"),
    ("0 9 * * *", "UTC", {"dst_gap": "later"}, "dst_gap 'later' is not allowed: use shift or skip"),
    ("0 9 * * *", "UTC", {"dst_overlap": "last"}, "dst_overlap 'last' is not allowed: use first or both"),
    ("rate(5 minutes)", "UTC", {"anchor": datetime(2026, 1, 1)}, "anchor must be a timezone-aware"),
]


@pytest.mark.parametrize(("expression", "timezone", "kwargs", "message"), INVALID)
def test_invalid_input_raises_validation_error_naming_the_bad_part(expression, timezone, kwargs, message):
    # Given bad input / When parsed / Then ValidationError says what is wrong and what is allowed
    with pytest.raises(ValidationError) as caught:
        parse_schedule(expression, timezone, **kwargs)
    assert message in caught.value.message


def test_field_errors_carry_the_field_name():
    with pytest.raises(ValidationError) as caught:
        parse_schedule("0 0 * * 9")
    assert caught.value.field == "day-of-week"


def test_schedule_is_immutable():
    schedule = parse_schedule("0 9 * * *")
    with pytest.raises(AttributeError):
        schedule.timezone = "Europe/London"


@pytest.mark.parametrize(
    ("expression", "kind"),
    [("CRON(0 12 ? * mon *)", "cron"), ("Rate(5 Minutes)", "rate"), ("AT(2026-01-01T00:00:00)", "at")],
)
def test_function_forms_are_case_insensitive(expression, kind):
    assert parse_schedule(expression).kind == kind
