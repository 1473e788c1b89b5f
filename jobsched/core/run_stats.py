"""Run statistics per tenant and minute: what is counted of an ended run, and how minutes add up to
the buckets ``GET /stats`` answers. Pure (docs/decisions/0061-run-stats-per-minute.md).

The sweeper counts a run once its in-flight ledger item is settled (every run it names has ended,
:mod:`jobsched.services.sweeper`): per (tenant, UTC minute of the run's due instant) it adds the run's
outcome and, for a scheduled run that started, its start lag (``started_at - due_at``) to a
fixed histogram. So the counters of a minute are complete once its runs' ledger items are settled
(about the sweeper's grace after the last of them ended), and reading a range costs one small item per
minute that had runs, whatever their number.

The lag histogram has fixed upper bounds (:data:`LAG_BOUNDS`): a percentile is the upper bound of the
bin it falls in (``lag_p50 = 2.0`` reads "half the runs started within 2 s of their due instant";
``86400.0`` reads "a day or more").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.instants import from_iso

#: Outcomes counted per minute of the runs' due instant (``dead_lettered`` also counts in ``failed``).
OUTCOMES = ("succeeded", "failed", "cancelled", "skipped", "dead_lettered")
#: Counted per minute of another instant than the due one: ``dead_letters``, the runs dead-lettered in
#: that minute (their ``dl_at``; decision 0064).
EVENTS = ("dead_letters",)
#: Upper bounds of the start-lag bins, seconds; the last bin also holds every lag over a day.
LAG_BOUNDS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0, 86400.0)
LAG_BINS = tuple(f"lag_b{i}" for i in range(len(LAG_BOUNDS)))
COUNTERS = OUTCOMES + EVENTS + LAG_BINS
#: Bucket widths ``GET /stats`` answers, in minutes.
BUCKETS = {"minute": 1, "hour": 60, "day": 1440}
#: At most this many buckets per call, and this many minutes from ``from`` to ``to`` (a week; the
#: alignment to whole buckets may add up to a bucket).
MAX_BUCKETS = 1440
MAX_MINUTES = 7 * 1440
_MINUTE = timedelta(minutes=1)
_MINUTE_FORMAT = "%Y%m%dT%H%M"
_TRIGGERS_WITHOUT_LAG = ("manual", "replay")
#: Instants a range may name (minute keys are 4-digit years; aligning up must not pass year 9999).
_FIRST_YEAR, _LAST_YEAR = 1970, 9998


def minute_key(instant: datetime) -> str:
    """The minute of an aware instant as a sort key, ``YYYYMMDDTHHMM`` (UTC)."""
    if instant.tzinfo is None:
        raise ValueError("run stats minutes are taken from aware instants")
    return instant.astimezone(UTC).strftime(_MINUTE_FORMAT)


def minute_of(key: str) -> datetime:
    return datetime.strptime(key, _MINUTE_FORMAT).replace(tzinfo=UTC)


def lag_bin(seconds: float) -> str:
    """The histogram counter a start lag of ``seconds`` adds to."""
    for i, bound in enumerate(LAG_BOUNDS):
        if seconds <= bound:
            return LAG_BINS[i]
    return LAG_BINS[-1]  # over a day: counted in the last bin


def tally_run(item: Mapping[str, Any]) -> tuple[str, str, dict[str, int]] | None:
    """(tenant, minute key, counters) of an ended run item; None for one still active or unreadable."""
    state, tenant, due = item.get("state"), item.get("tenant"), item.get("due_at")
    if state not in ("succeeded", "failed", "cancelled", "skipped") or not tenant or not due:
        return None
    due_at = from_iso(due)
    counters = {state: 1}
    if item.get("dl_at"):  # the item attribute of Run.dead_lettered_at
        counters["dead_lettered"] = 1
    started = item.get("started_at")
    if started and item.get("trigger") not in _TRIGGERS_WITHOUT_LAG:
        counters[lag_bin(max(0.0, (from_iso(started) - due_at).total_seconds()))] = 1
    return tenant, minute_key(due_at), counters


def tally_dead_letter(item: Mapping[str, Any]) -> tuple[str, str, dict[str, int]] | None:
    """(tenant, minute key of its ``dl_at``, ``{"dead_letters": 1}``) of an ended run that is a dead
    letter; None otherwise."""
    counted = tally_run(item)
    if counted is None or not item.get("dl_at"):
        return None
    return counted[0], minute_key(from_iso(item["dl_at"])), {"dead_letters": 1}


def tally(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    """Counters per (tenant, minute) of the ended runs among ``items``: by due minute, and the dead
    letters by the minute they were dead-lettered."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for item in items:
        for counted in (tally_run(item), tally_dead_letter(item)):
            if counted is None:
                continue
            tenant, minute, counters = counted
            into = out.setdefault((tenant, minute), {})
            for name, n in counters.items():
                into[name] = into.get(name, 0) + n
    return out


def percentile(bins: Mapping[str, int], p: float) -> float | None:
    """The upper bound of the bin holding the ``p``-th percentile (None: no lag counted)."""
    total = sum(bins.get(name, 0) for name in LAG_BINS)
    if not total:
        return None
    rank, seen = max(1, -(-total * p // 100)), 0
    for i, name in enumerate(LAG_BINS):
        seen += bins.get(name, 0)
        if seen >= rank:
            return LAG_BOUNDS[i]
    return LAG_BOUNDS[-1]  # pragma: no cover - seen reaches total at the last bin


@dataclass(frozen=True)
class StatsRange:
    """A validated ``GET /stats`` range: whole buckets from ``start`` (inclusive) to ``end``."""

    start: datetime
    end: datetime
    bucket: str
    minutes: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "minutes", BUCKETS[self.bucket])

    def bucket_starts(self) -> list[datetime]:
        width = timedelta(minutes=self.minutes)
        count = int((self.end - self.start) / width)
        return [self.start + i * width for i in range(count)]

    def first_key(self) -> str:
        return minute_key(self.start)

    def last_key(self) -> str:
        return minute_key(self.end - _MINUTE)


def stats_range(start: datetime, end: datetime, bucket: str) -> StatsRange:
    """Align ``start`` down and ``end`` up to whole buckets (UTC) and check the size;
    :class:`ValidationError` naming the field otherwise."""
    if bucket not in BUCKETS:
        raise ValidationError(f"bucket must be one of {', '.join(BUCKETS)}, got {bucket!r}", field="bucket")
    if start.tzinfo is None or end.tzinfo is None:
        raise ValidationError("from and to need a UTC offset", field="from" if start.tzinfo is None else "to")
    for name, instant in (("from", start), ("to", end)):
        if not _FIRST_YEAR <= instant.astimezone(UTC).year <= _LAST_YEAR:
            raise ValidationError(f"{name} must be in the years {_FIRST_YEAR}-{_LAST_YEAR}", field=name)
    if start >= end:
        raise ValidationError("from must be before to", field="from")
    if end - start > timedelta(minutes=MAX_MINUTES):
        raise ValidationError(f"from: at most {MAX_MINUTES // 1440} days before to per call", field="from")
    width = BUCKETS[bucket] * 60
    low = _align(start, width, up=False)
    high = _align(end, width, up=True)
    if (high - low).total_seconds() // width > MAX_BUCKETS:
        raise ValidationError(
            f"bucket: at most {MAX_BUCKETS} buckets per call, choose a wider one", field="bucket"
        )
    return StatsRange(low, high, bucket)


def _align(instant: datetime, width_seconds: int, *, up: bool) -> datetime:
    epoch = int(instant.astimezone(UTC).timestamp())
    low = epoch - epoch % width_seconds
    if up and (low != epoch or instant.microsecond):
        low += width_seconds
    return datetime.fromtimestamp(low, UTC)


def buckets(span: StatsRange, minutes: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per bucket of ``span`` from the minute items read (``minute`` plus counters):
    the outcomes summed, the lag percentiles from the summed histogram, the histogram itself."""
    width = span.minutes
    sums: list[dict[str, int]] = [dict.fromkeys(COUNTERS, 0) for _ in span.bucket_starts()]
    for item in minutes:
        at = minute_of(item["minute"])
        index = int((at - span.start).total_seconds() // 60) // width
        if 0 <= index < len(sums):
            for name in COUNTERS:
                sums[index][name] += int(item.get(name, 0))
    out = []
    for start, counts in zip(span.bucket_starts(), sums, strict=True):
        lag = {name: counts[name] for name in LAG_BINS}
        out.append(
            {
                "start": start,
                **{name: counts[name] for name in OUTCOMES + EVENTS},
                "lag_count": sum(lag.values()),
                "lag_p50": percentile(lag, 50),
                "lag_p99": percentile(lag, 99),
                "lag_bins": [lag[name] for name in LAG_BINS],
            }
        )
    return out
