"""Next fires of a schedule, with the DST policy of DESIGN.md §3.

How: croniter enumerates matching *naive local wall times* (it is only used for matching); each wall
time is then resolved against the zone with zoneinfo, so no library quirk decides DST behaviour.
A day-of-month ``nW``/``LW`` is decided here too, not by croniter: only wall times on
:func:`nearest_weekday` of their month are kept, and a month without day n has none (decision 0008).
Resolving a wall time:

* a wall time that exists once fires at that instant (note ``None``);
* a wall time in a gap (spring forward): wall-clock schedules with ``dst_gap=shift`` fire once at the
  first instant after the gap (``dst_gap_shifted``; every occurrence of one gap collapses into that
  fire), with ``skip`` nothing fires; interval-like schedules never fire a non-existent time;
* a wall time in an overlap (fall back) fires at its first occurrence (``dst_overlap_first``) and, for
  interval-like schedules or ``dst_overlap=both``, also at its second (``dst_overlap_second``).

Interval-like schedules therefore fire at exactly the instants whose local time matches, which keeps
``*/15 * * * *`` firing every 15 real minutes through both transitions. Two occurrences on the same
instant are one fire (the first one generated keeps its note). ``rate()`` is elapsed time from the
schedule's anchor; ``at()`` is one wall time resolved like a wall-clock cron occurrence.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from calendar import monthrange
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from itertools import islice
from typing import Literal
from zoneinfo import ZoneInfo

from jobsched.core.errors import ValidationError
from jobsched.core.schedules import Schedule

MAX_COUNT = 1000
NOTE_SHIFTED = "dst_gap_shifted"
NOTE_FIRST = "dst_overlap_first"
NOTE_SECOND = "dst_overlap_second"
NOTE_SKIPPED = "dst_gap_skipped"  # only yielded with include_skipped=True: an occurrence not fired
_SECOND = timedelta(seconds=1)
_DAY = timedelta(days=1)


@dataclass(frozen=True)
class Fire:
    """One fire: the instant (aware, UTC), the same instant in the schedule's zone (aware, with the
    right ``fold``), and a note when DST moved or doubled it (see the module docstring)."""

    at: datetime
    local: datetime
    note: str | None = None


def next_fires(schedule: Schedule, after: datetime, count: int) -> list[Fire]:
    """The first ``count`` (1..1000) fires strictly after ``after`` (an aware datetime)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ValidationError(f"count {count!r} is out of range 1-{MAX_COUNT}", field="count")
    return list(islice(iter_fires(schedule, after), count))


def fires_between(schedule: Schedule, after: datetime, until: datetime, limit: int) -> list[Fire]:
    """The fires in ``(after, until]``, at most ``limit`` of them (oldest first)."""
    _require_aware(until, "until")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValidationError(f"limit {limit!r} must be a whole number >= 1", field="limit")
    out: list[Fire] = []
    for fire in iter_fires(schedule, after):
        if fire.at > until or len(out) >= limit:
            break
        out.append(fire)
    return out


def iter_fires(schedule: Schedule, after: datetime, *, include_skipped: bool = False) -> Iterator[Fire]:
    """Lazily yield the fires strictly after ``after``, oldest first; unbounded except for ``at()``
    and year-limited ``cron(...)``.

    With ``include_skipped`` a wall-clock schedule under ``dst_gap=skip`` also yields one
    ``dst_gap_skipped`` entry per gap (at the first instant after it), so a caller can record the
    skipped run; those entries are not fires and never suppress a real fire on the same instant.
    """
    _require_aware(after, "after")
    zone = schedule.zone
    if schedule.kind == "rate":
        return _rate_fires(schedule, after, zone)
    if schedule.kind == "at":
        assert schedule.at_local is not None  # parse_schedule sets it for at()
        walls: Iterator[datetime] = iter([schedule.at_local])
    else:
        walls = _cron_walls(schedule, _start_wall(after, zone))
    return _resolve_all(schedule, walls, after, zone, include_skipped)


def _offset(zone: ZoneInfo, value: datetime) -> timedelta:
    """``zone``'s UTC offset at ``value`` (a ZoneInfo always has one)."""
    offset = zone.utcoffset(value)
    assert offset is not None
    return offset


def _require_aware(value: datetime, name: str) -> None:
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{name} must be a timezone-aware datetime, got {value!r}", field=name)


def _rate_fires(schedule: Schedule, after: datetime, zone: ZoneInfo) -> Iterator[Fire]:
    assert schedule.rate_seconds is not None and schedule.anchor is not None  # set for rate()
    step = timedelta(seconds=schedule.rate_seconds)
    anchor = schedule.anchor
    at = anchor + ((after - anchor) // step + 1) * step
    while True:
        yield Fire(at=at, local=at.astimezone(zone))
        at += step


def _start_wall(after: datetime, zone: ZoneInfo) -> datetime:
    """A naive local wall time early enough that every wall time whose fire can fall after ``after``
    lies after it (an overlap's second fold and a gap's shift map earlier walls to later instants)."""
    utc = after.astimezone(UTC)
    low = min(_offset(zone, (utc + delta).astimezone(zone)) for delta in (-_DAY, timedelta(0), _DAY))
    return utc.replace(tzinfo=None) + low - _SECOND


def nearest_weekday(year: int, month: int, day: int | Literal["L"]) -> int | None:
    """The day of ``month`` that ``nW`` fires on (``day="L"``: ``LW``), or None when the month has no
    day n, so no fire that month (decision 0008; a plain ``n`` has none either).

    Quartz's rules, never leaving the month: a Saturday moves to the Friday before, except the 1st,
    which moves to Monday the 3rd; a Sunday moves to the Monday after, except the last day, which
    moves to the Friday before (the 29th, or the 26th of a 28-day February).
    """
    last = monthrange(year, month)[1]
    n = last if day == "L" else day
    if n > last:
        return None
    weekday = date(year, month, n).weekday()  # Monday 0 ... Saturday 5, Sunday 6
    if weekday == 5:
        return n - 1 if n > 1 else 3
    if weekday == 6:
        return n + 1 if n < last else n - 2
    return n


def _cron_walls(schedule: Schedule, start: datetime) -> Iterator[datetime]:
    """Matching naive wall times after ``start``, honouring the year field of ``cron(...)`` and, for
    ``nW``/``LW``, keeping only the nearest weekday of each month (croniter matches every day then).

    croniter is imported on the first call, not with the module: the worker imports this module but
    enumerates no occurrences, and importing croniter was part of every cold start."""
    from croniter import CroniterBadDateError, croniter

    years = schedule.years
    one_day = schedule.nearest_weekday is not None or schedule.before_last_day is not None
    while True:
        if years is not None:
            index = bisect_right(years, start.year - 1)
            if index == len(years):
                return
            if years[index] > start.year:
                start = datetime(years[index], 1, 1) - _SECOND
        cron = croniter(
            schedule.cron,
            start,
            ret_type=datetime,
            day_or=schedule.day_or,
            second_at_beginning=schedule.seconds_field,
        )
        while True:
            try:
                wall = cron.get_next(datetime)
            except CroniterBadDateError:
                return
            if years is not None and wall.year not in years:
                start = datetime(wall.year, 1, 1)  # re-enter the outer loop to jump to a listed year
                break
            if one_day:
                day = _day_of_month(schedule, wall.year, wall.month)
                if day != wall.day:  # restart croniter at this month's W day, or else the next month
                    start = _w_restart(wall, day)
                    break
            yield wall


def _day_of_month(schedule: Schedule, year: int, month: int) -> int | None:
    """The one day of the month an ``nW``, ``LW`` or ``L-n`` schedule fires on (None: none)."""
    if schedule.nearest_weekday is not None:
        return nearest_weekday(year, month, schedule.nearest_weekday)
    day = monthrange(year, month)[1] - (schedule.before_last_day or 0)
    return day if day >= 1 else None


def _w_restart(wall: datetime, day: int | None) -> datetime:
    """Where croniter resumes when ``wall`` is not on its month's W day ``day`` (None: no W day)."""
    if day is not None and day > wall.day:
        return datetime(wall.year, wall.month, day) - _SECOND
    if wall.month == 12:
        return datetime(wall.year + 1, 1, 1) - _SECOND
    return datetime(wall.year, wall.month + 1, 1) - _SECOND


def _resolve_all(
    schedule: Schedule, walls: Iterator[datetime], after: datetime, zone: ZoneInfo, include_skipped: bool
) -> Iterator[Fire]:
    """Resolve wall times to fires in instant order, dropping duplicates and fires not after ``after``.

    A wall time's first candidate (its only instant, the first fold, or the shifted instant) never
    decreases from one wall time to the next; second folds come later, so they wait in a heap until
    a first candidate passes them.
    """
    elapsed = not schedule.wall_clock
    shift = schedule.dst_gap == "shift"
    both = elapsed or schedule.dst_overlap == "both"
    after_utc = after.astimezone(UTC)
    pending: list[tuple[datetime, int, Fire]] = []
    last: datetime | None = None
    last_skip: datetime | None = None
    seq = 0
    for wall in walls:
        first = wall.replace(tzinfo=zone)
        offset0 = _offset(zone, first)
        offset1 = _offset(zone, wall.replace(tzinfo=zone, fold=1))
        if offset0 == offset1:  # exists once
            fire = Fire((wall - offset0).replace(tzinfo=UTC), first)
            second = None
        elif offset0 > offset1:  # overlap: the wall time happens twice
            fire = Fire((wall - offset0).replace(tzinfo=UTC), first, NOTE_FIRST)
            later = wall.replace(tzinfo=zone, fold=1)
            second = Fire((wall - offset1).replace(tzinfo=UTC), later, NOTE_SECOND) if both else None
        else:  # gap: the wall time does not exist
            if elapsed or not (shift or include_skipped):
                continue
            instant = _gap_end(wall, offset0, offset1, zone)
            fire = Fire(instant, instant.astimezone(zone), NOTE_SHIFTED if shift else NOTE_SKIPPED)
            second = None
            if not shift:
                if instant > after_utc and instant != last_skip:
                    last_skip = instant
                    seq += 1
                    heapq.heappush(pending, (instant, seq, fire))
                continue
        while pending and pending[0][0] <= fire.at:
            ready = heapq.heappop(pending)[2]
            if ready.note == NOTE_SKIPPED:
                yield ready
            elif ready.at != last:
                last = ready.at
                yield ready
        if fire.at > after_utc and fire.at != last:
            last = fire.at
            yield fire
        if second is not None and second.at > after_utc:
            seq += 1
            heapq.heappush(pending, (second.at, seq, second))
    while pending:
        ready = heapq.heappop(pending)[2]
        if ready.note == NOTE_SKIPPED or ready.at != last:
            last = ready.at if ready.note != NOTE_SKIPPED else last
            yield ready


def _gap_end(wall: datetime, before: timedelta, after: timedelta, zone: ZoneInfo) -> datetime:
    """The transition instant of the gap that contains ``wall`` (the first instant after the gap).

    ``wall - after`` lies before the transition and ``wall - before`` at or after it; bisect on whole
    seconds between them (tz transitions are on whole seconds).
    """
    low = (wall - after).replace(tzinfo=UTC)  # offset before the transition here
    high = (wall - before).replace(tzinfo=UTC)  # offset after the transition here
    while high - low > _SECOND:
        mid = low + (high - low) // 2
        mid = mid.replace(microsecond=0)
        if zone.utcoffset(mid.astimezone(zone)) == before:
            low = mid
        else:
            high = mid
    return high
