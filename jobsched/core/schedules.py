"""Schedule expressions: parse, validate and classify them (DESIGN.md §3).

Accepted forms (each with an IANA zone, default UTC):

* unix cron, 5 fields ``min hour dom month dow`` or 6 with a *leading* seconds field;
* macros ``@yearly @annually @monthly @weekly @daily @midnight @hourly``;
* EventBridge-style ``cron(min hour dom month dow year)`` with ``?``, ``L``, ``W``, ``LW`` and ``#``;
* ``rate(N unit)``: elapsed time from an anchor instant (default: the Unix epoch);
* ``at(YYYY-MM-DDThh:mm:ss)``: one local time in the schedule's zone.

Every cron form is validated field by field here, so a bad field gets a message that names it and
what is allowed, then converted to the croniter dialect (``L`` and ``#`` are croniter's). ``nW`` and
``LW`` are not handed to croniter: the day-of-month becomes ``*`` for croniter and the timeline keeps
only the nearest weekday, which the core computes (decision 0008: a month without day n has no fire).
Matching happens on naive local wall times; :mod:`jobsched.core.timeline` turns them into instants
under the DST policy. Pure: no clock, no environment.
"""

from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jobsched.core.errors import ValidationError

DST_GAP_POLICIES = ("shift", "skip")
DST_OVERLAP_POLICIES = ("first", "both")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
RATE_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
MONTH_NAMES = {
    m: i + 1
    for i, m in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    )
}
DOW_NAMES = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}


@dataclass(frozen=True)
class _Field:
    """What one cron field allows: its name, numeric range and symbolic names."""

    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


SECOND = _Field("second", 0, 59)
MINUTE = _Field("minute", 0, 59)
HOUR = _Field("hour", 0, 23)
DOM = _Field("day-of-month", 1, 31)
MONTH = _Field("month", 1, 12, MONTH_NAMES)
DOW_UNIX = _Field("day-of-week", 0, 7, DOW_NAMES)  # 0 and 7 are Sunday
DOW_AWS = _Field("day-of-week", 1, 7, {k: v + 1 for k, v in DOW_NAMES.items()})  # 1 is Sunday
YEAR = _Field("year", 1970, 2199)

_ITEM = re.compile(r"^(?P<base>\*|[A-Z0-9]+(?:-[A-Z0-9]+)?)(?:/(?P<step>[^/]*))?$")
_RATE = re.compile(r"^rate\(\s*(?P<n>\S+)\s+(?P<unit>[A-Za-z]+)\s*\)$", re.IGNORECASE)
_AT = re.compile(r"^at\((?P<when>[^)]*)\)$", re.IGNORECASE)
_AWS_CRON = re.compile(r"^cron\((?P<body>.*)\)$", re.IGNORECASE)


@dataclass(frozen=True)
class Schedule:
    """A parsed, validated, immutable schedule. Build it with :func:`parse_schedule`.

    ``wall_clock`` is the DESIGN §3 classification: True when neither the minute nor the hour field
    starts with ``*`` (and for ``at()``); such schedules follow ``dst_gap``/``dst_overlap``. Interval-like
    schedules (and ``rate()``) follow elapsed time instead.
    """

    expression: str
    timezone: str = "UTC"
    dst_gap: str = "shift"
    dst_overlap: str = "first"
    _: KW_ONLY
    kind: str = "cron"  # "cron" | "rate" | "at"
    wall_clock: bool = True
    cron: str | None = None  # croniter-dialect expression matched against naive local time
    # day-of-month 'nW' (n) or 'LW' ("L"): only the weekday nearest day n (the last day) of each month
    # fires, a month without day n has none; ``cron``'s day-of-month is then '*' (the timeline filters)
    nearest_weekday: int | Literal["L"] | None = None
    # day-of-month 'L-n' (Quartz): only the day n days before the month's last day fires (a month
    # shorter than n + 1 days has none); ``cron``'s day-of-month is then '*' (the timeline filters)
    before_last_day: int | None = None
    seconds_field: bool = False  # cron has a leading seconds field
    day_or: bool = True  # both day fields restricted: a day matches when either matches
    years: tuple[int, ...] | None = None  # allowed years of cron(...), sorted; None = any
    rate_seconds: int | None = None
    anchor: datetime | None = None  # rate(): fires at anchor + k * rate_seconds
    at_local: datetime | None = None  # at(): naive local wall time

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's zone (ZoneInfo caches instances, so this is cheap)."""
        return ZoneInfo(self.timezone)


def parse_schedule(
    expression: str,
    timezone: str = "UTC",
    *,
    dst_gap: str = "shift",
    dst_overlap: str = "first",
    anchor: datetime | None = None,
) -> Schedule:
    """Parse and validate a schedule; raise :class:`ValidationError` naming the bad part.

    ``anchor`` only matters for ``rate()``: fires are at ``anchor + k * N units`` (k integer); it
    defaults to the Unix epoch so that a rate is deterministic without one.
    """
    if not isinstance(expression, str) or not expression.strip():
        raise ValidationError("schedule expression is empty", field="expression")
    text = " ".join(expression.split())
    validate_timezone(timezone)
    if dst_gap not in DST_GAP_POLICIES:
        raise ValidationError(f"dst_gap '{dst_gap}' is not allowed: use shift or skip", field="dst_gap")
    if dst_overlap not in DST_OVERLAP_POLICIES:
        raise ValidationError(
            f"dst_overlap '{dst_overlap}' is not allowed: use first or both", field="dst_overlap"
        )
    common: dict[str, Any] = {
        "expression": text,
        "timezone": timezone,
        "dst_gap": dst_gap,
        "dst_overlap": dst_overlap,
    }
    lowered = text.lower()
    if lowered.startswith("rate("):
        return Schedule(**common, kind="rate", wall_clock=False, **_parse_rate(text, anchor))
    if lowered.startswith("at("):
        return Schedule(**common, kind="at", wall_clock=True, at_local=_parse_at(text))
    if lowered.startswith("cron("):
        return Schedule(**common, kind="cron", **_parse_aws_cron(text))
    if text.startswith("@"):
        macro = MACROS.get(lowered)
        if macro is None:
            raise ValidationError(
                f"macro '{text}' is not known: use one of {', '.join(MACROS)}", field="expression"
            )
        return Schedule(**common, kind="cron", **_parse_unix_cron(macro))
    return Schedule(**common, kind="cron", **_parse_unix_cron(text))


def validate_timezone(timezone: str) -> ZoneInfo:
    """Return the ZoneInfo for an IANA name, or raise ValidationError."""
    if not isinstance(timezone, str) or not timezone:
        raise ValidationError(
            "time zone is empty: use an IANA name such as 'Europe/London'", field="timezone"
        )
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationError(
            f"time zone '{timezone}' is not a known IANA zone: use a name such as 'America/New_York'",
            field="timezone",
        ) from None


def _parse_rate(text: str, anchor: datetime | None) -> dict[str, Any]:
    match = _RATE.match(text)
    if match is None:
        raise ValidationError(
            f"rate expression '{text}' is not valid: use rate(N unit), e.g. rate(5 minutes)"
        )
    raw_n, unit = match["n"], match["unit"].lower()
    if not raw_n.isdigit() or int(raw_n) < 1:
        raise ValidationError(f"rate value '{raw_n}' is not valid: use a whole number of at least 1")
    base = RATE_UNITS.get(unit[:-1] if unit.endswith("s") else unit)
    if base is None:
        raise ValidationError(
            f"rate unit '{match['unit']}' is not allowed: use second(s), minute(s), hour(s) or day(s)"
        )
    if anchor is not None and anchor.tzinfo is None:
        raise ValidationError("rate anchor must be a timezone-aware datetime", field="anchor")
    return {"rate_seconds": int(raw_n) * base, "anchor": (anchor or EPOCH).astimezone(UTC)}


def _parse_at(text: str) -> datetime:
    match = _AT.match(text)
    when = match["when"].strip() if match else ""
    if match is None or not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", when):
        raise ValidationError(
            f"one-off expression '{text}' is not valid: use at(YYYY-MM-DDThh:mm:ss) in the schedule's zone"
        )
    try:
        return datetime.fromisoformat(when)
    except ValueError as exc:
        raise ValidationError(f"at() time '{when}' is not a real date and time: {exc}") from None


def _parse_unix_cron(text: str) -> dict[str, Any]:
    parts = text.split(" ")
    if len(parts) not in (5, 6):
        raise ValidationError(
            f"cron expression '{text}' has {len(parts)} fields: use 5 (minute hour day-of-month month "
            "day-of-week) or 6 with a leading seconds field",
            field="expression",
        )
    seconds = len(parts) == 6
    specs = ([SECOND] if seconds else []) + [MINUTE, HOUR, DOM, MONTH, DOW_UNIX]
    converted = [_convert_field(value, spec, aws=False) for value, spec in zip(parts, specs, strict=True)]
    minute, hour, dom, dow = parts[-5], parts[-4], parts[-3], parts[-1]
    return _finish_cron(converted, seconds, minute, hour, dom, dow, years=None, text=text)


def _parse_aws_cron(text: str) -> dict[str, Any]:
    match = _AWS_CRON.match(text)
    if match is None or len(match["body"].split()) != 6:
        raise ValidationError(
            f"cron expression '{text}' is not valid: "
            "use cron(minute hour day-of-month month day-of-week year)",
            field="expression",
        )
    minute, hour, dom, month, dow, year = match["body"].split()
    if (dom == "?") == (dow == "?"):
        raise ValidationError(
            f"cron expression '{text}': exactly one of day-of-month and day-of-week must be '?'",
            field="expression",
        )
    converted = [
        _convert_field(minute, MINUTE, aws=True),
        _convert_field(hour, HOUR, aws=True),
        _convert_field(dom, DOM, aws=True),
        _convert_field(month, MONTH, aws=True),
        _convert_field(dow, DOW_AWS, aws=True),
    ]
    years = _expand_years(year)
    return _finish_cron(converted, False, minute, hour, dom, dow, years=years, text=text)


def _finish_cron(
    converted: list[str],
    seconds: bool,
    minute: str,
    hour: str,
    dom: str,
    dow: str,
    *,
    years: tuple[int, ...] | None,
    text: str,
) -> dict[str, Any]:
    """Classify, pick the day rule and check the expression can ever fire."""
    unrestricted = ("*", "?")
    day_or = not (dom.startswith(unrestricted) or dow.startswith(unrestricted))
    if day_or and any(mark in converted[-3] + converted[-1] for mark in "LW#"):
        # croniter does not apply the either-day rule to these: refuse rather than guess
        raise ValidationError(
            f"cron expression '{text}': 'L', 'W' and '#' need the other day field to be '*' "
            "(when both day fields are restricted a day matches either, which they do not support)",
            field="expression",
        )
    nearest: int | Literal["L"] | None = None
    before_last: int | None = None
    checked = converted
    if converted[-3].startswith("L-"):
        # the core decides L-n like W: croniter matches every day and the timeline keeps the day n
        # before the last; it exists exactly in the months that have a day n + 1, hence the check
        before_last = int(converted[-3][2:])
        checked = [*converted[:-3], str(before_last + 1), *converted[-2:]]
        converted = [*converted[:-3], "*", *converted[-2:]]
    elif converted[-3].endswith("W"):
        # the core decides W (decision 0008), so croniter matches every day and the timeline keeps the
        # nearest weekday; W never leaves its month, so nW can fire exactly when a plain n can
        day = converted[-3][:-1]
        nearest = "L" if day == "L" else int(day)
        checked = [*converted[:-3], day, *converted[-2:]]
        converted = [*converted[:-3], "*", *converted[-2:]]
    cron = " ".join(converted)
    try:
        fires = _ever_fires(" ".join(checked), day_or, seconds, years)
    except Exception as exc:  # croniter rejects a combination our field checks let through
        raise ValidationError(f"cron expression '{text}' is not valid: {exc}", field="expression") from None
    if not fires:
        where = " in its years" if years else ""
        raise ValidationError(
            f"cron expression '{text}' never fires: its day-of-month, month and day-of-week fields "
            f"match no date{where}",
            field="expression",
        )
    return {
        "wall_clock": not (minute.startswith("*") or hour.startswith("*")),
        "cron": cron,
        "nearest_weekday": nearest,
        "before_last_day": before_last,
        "seconds_field": seconds,
        "day_or": day_or,
        "years": years,
    }


def _ever_fires(cron: str, day_or: bool, seconds: bool, years: tuple[int, ...] | None) -> bool:
    """Whether the expression matches at least one date (in one of ``years`` when given).

    croniter is imported here, not with the module: only parsing a cron expression needs it, and the
    worker, which imports this module but parses none, would pay for it at every cold start."""
    from croniter import CroniterBadDateError, croniter

    for year in years or (2000,):
        try:
            start = datetime(year, 1, 1) - timedelta(seconds=1)  # so that Jan 1 00:00:00 counts
            found = croniter(cron, start, day_or=day_or, second_at_beginning=seconds)
            when = found.get_next(datetime)
        except CroniterBadDateError:
            return False  # nothing in croniter's 50-year search window: no later year helps
        if years is None or when.year in years:
            return True
    return False


def _convert_field(value: str, spec: _Field, *, aws: bool) -> str:
    """Validate one field and return it in the croniter dialect."""
    upper = value.upper()
    items = upper.split(",")
    if "" in items:
        raise ValidationError(f"{spec.name} field '{value}' has an empty list item", field=spec.name)
    if len(items) > 1 and any(_special(item, spec) for item in items):
        raise ValidationError(
            f"{spec.name} field '{value}': '?', 'L', 'L-n', 'W' and '#' cannot be combined with a list",
            field=spec.name,
        )
    return ",".join(_convert_item(item, value, spec, aws) for item in items)


def _special(item: str, spec: _Field) -> bool:
    """Whether a list item is one of the day fields' specials (``?``, ``L``, ``L-n``, ``LW``, ``nW``,
    ``L5``/``5L``, ``n#k``), which stand alone in their field."""
    if item == "?":
        return True
    if spec is DOM:
        return item.startswith("L") or item.endswith("W")
    return spec.name == "day-of-week" and ("L" in item or "#" in item)


def _convert_item(item: str, raw: str, spec: _Field, aws: bool) -> str:
    is_dom, is_dow = spec is DOM, spec.name == "day-of-week"
    if item == "?":
        if not (is_dom or is_dow):
            raise ValidationError(f"{spec.name} field '{raw}': '?' is only allowed in the day fields")
        return "*"
    if is_dom and item == "L":
        return "L"
    if is_dom and item == "LW":
        return "LW"
    if is_dom and item.startswith("L-"):
        before = item[2:]
        if not before.isdigit() or not 1 <= int(before) <= 30:
            raise ValidationError(
                f"day-of-month field '{raw}': 'L-n' needs n from 1 to 30 (days before the last day)",
                field=spec.name,
            )
        return f"L-{int(before)}"
    if is_dom and item.endswith("W"):
        day = _value(item[:-1], raw, spec, aws)
        return f"{day}W"
    if is_dow and "#" in item:
        day_text, _, nth = item.partition("#")
        day = _value(day_text, raw, spec, aws)
        if not nth.isdigit() or not 1 <= int(nth) <= 5:
            raise ValidationError(f"day-of-week field '{raw}': the week number after '#' must be 1-5")
        return f"{day}#{nth}"
    if is_dow and aws and item == "L":
        return "6"  # EventBridge: a lone L in day-of-week is the last day of the week, Saturday
    if is_dow and aws and len(item) > 1 and item.endswith("L"):
        return f"L{_value(item[:-1], raw, spec, aws)}"
    if is_dow and not aws and len(item) > 1 and item.startswith("L"):
        return f"L{_value(item[1:], raw, spec, aws)}"
    match = _ITEM.match(item)
    if match is None:
        raise ValidationError(
            f"{spec.name} field '{raw}' is not valid: use *, a value, a range a-b, a list a,b or a step /n",
            field=spec.name,
        )
    base, step = match["base"], match["step"]
    if step is not None:
        if not step.isdigit() or int(step) < 1:
            raise ValidationError(f"{spec.name} field '{raw}': step '{step}' must be a whole number >= 1")
        if int(step) > spec.high:
            raise ValidationError(f"{spec.name} field '{raw}': step '{step}' is larger than {spec.high}")
    if base == "*":
        return "*" if step is None else f"*/{step}"
    if "-" in base:
        first_text, last_text = base.split("-")
        first, last = _value(first_text, raw, spec, aws), _value(last_text, raw, spec, aws)
        if first > last:
            wrap = f"{first_text}-{spec.high},{spec.low}-{last_text}"
            raise ValidationError(
                f"{spec.name} field '{raw}': range '{base}' must not run backwards "
                f"(for one that wraps around, write the list '{wrap}')",
                field=spec.name,
            )
    else:
        first = _value(base, raw, spec, aws)
        last = first if step is None else max(first, _top(spec))  # '7/n' (unix): Sunday alone
    if step is None and first < last:
        return f"{first}-{last}"
    # croniter reads 'a-a' as the whole range, so single values and stepped ranges become lists
    return ",".join(str(v) for v in range(first, last + 1, int(step or 1)))


def _top(spec: _Field) -> int:
    """Where 'N/step' stops: the field's highest value, but day-of-week steps run to Saturday (6) in
    both dialects. 7 in unix day-of-week is only another way to write Sunday, so '6/1' is Saturday
    alone and '1/2' Monday, Wednesday, Friday (as croniter, cronsim, robfig/cron and EventBridge's
    'MON/2'); a range written up to 7, '1-7/2', still reaches Sunday because it names it."""
    return 6 if spec.name == "day-of-week" else spec.high


def _value(text: str, raw: str, spec: _Field, aws: bool) -> int:
    """One value of a field, in croniter numbering (EventBridge days of week are shifted to 0-6)."""
    if spec.names and text in spec.names:
        number = spec.names[text]
    elif text.isdigit():
        number = int(text)
        if not spec.low <= number <= spec.high:
            raise ValidationError(
                f"{spec.name} field '{text}' is out of range {spec.low}-{spec.high}", field=spec.name
            )
    else:
        allowed = f"{spec.low}-{spec.high}" + (
            " or a name like " + next(iter(spec.names)) if spec.names else ""
        )
        raise ValidationError(
            f"{spec.name} field '{raw}' is not valid: '{text}' is not {allowed}", field=spec.name
        )
    if spec is DOW_AWS:
        return number - 1
    return number


def _expand_years(value: str) -> tuple[int, ...] | None:
    """The allowed years of an EventBridge year field, or None for every year."""
    if value in ("*", "?"):
        return None
    years: set[int] = set()
    for item in value.split(","):
        match = _ITEM.match(item)
        if match is None or not item:
            raise ValidationError(f"year field '{value}' is not valid: use *, a year, a range or a list")
        base, step = match["base"], match["step"]
        if step is not None and (not step.isdigit() or int(step) < 1):
            raise ValidationError(f"year field '{value}': step '{step}' must be a whole number >= 1")
        if base == "*":
            first, last = YEAR.low, YEAR.high
        elif "-" in base:
            first, last = (_value(p, value, YEAR, True) for p in base.split("-"))
            if first > last:
                raise ValidationError(f"year field '{value}': range '{base}' must not run backwards")
        else:
            first = _value(base, value, YEAR, True)
            last = first if step is None else YEAR.high
        years.update(range(first, last + 1, int(step or 1)))
    return tuple(sorted(years))
