"""The forecast: runs due per minute for the next hour, per pool and priority. Pure (decision 0054).

Two sources, both things the system already holds, never a second schedule engine:

* **runs queued ahead**: the dispatcher sends a run up to 900 s before its due instant (SQS
  ``DelaySeconds``); the in-flight ledger names each one as ``<run_key>#<job_id>`` and the run key
  begins with the scheduled instant (:func:`jobsched.core.ids.run_key_for`), so each is counted at
  that instant (:func:`parse_entry`);
* **the due index**: an active job's cursor (``next_due_at``) is its first occurrence not yet
  dispatched; its fires from the cursor on are read through the time core
  (:func:`jobsched.core.timeline.iter_fires`: the job's zone, the DST policy), up to the end of the
  window. The runs queued ahead lie before the cursor, so nothing is counted twice — except while a
  dispatcher tick moves an occurrence from one source to the other between the forecast's two reads.
  The dispatcher records a run in the ledger before it advances the job's cursor past it, so the
  forecast reads the index *first* and the ledger second
  (:class:`jobsched.services.forecast.ForecastService`): an occurrence moved between the reads is
  then in both, never in neither, and
  :func:`build_forecast` counts a scheduled occurrence the ledger names once, skipping the job's fire
  at the same instant (and a ledger entry seen twice, as while the sweeper compacts a ledger item).

Each minute holds a count and a *burst*: the most runs due in one second of it (10,000 runs at
09:00:00 are a burst of 10,000, a per-second job a burst of 1). :func:`needed_concurrency` turns a
minute into the concurrency that starts each of its runs within a stated lag.

What is not forecast: manual triggers and backfills not yet made, retries (their backoff is random:
the sizing model's retry headroom covers them, :mod:`jobsched.aws.sizing`), jitter (a run is counted
at its scheduled instant; jitter only spreads it later), and an overlap policy that will skip a fire.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.core.instants import require_aware, to_iso
from jobsched.core.pools import LAMBDA_POOL, queue_for
from jobsched.core.schedules import Schedule
from jobsched.core.timeline import iter_fires

#: The forecast covers this many whole minutes from the current one.
WINDOW_MINUTES = 60
#: A job contributes at most this many fires to one forecast (a per-second job: 3,600 in an hour).
MAX_FIRES_PER_JOB = 3600
_KEY_CHARS = len("20261129T204500.123Z")
_MINUTE = timedelta(minutes=1)
_EPSILON = timedelta(milliseconds=1)


@dataclass(frozen=True)
class JobView:
    """What the forecast needs of a job: who owns it, where its runs go, its schedule and cursor."""

    tenant: str
    job_id: str
    pool: str
    priority: str
    schedule: Schedule | None  # None: the stored schedule no longer parses (counted as nothing)
    next_due_at: datetime | None


@dataclass(frozen=True)
class Queued:
    """A run queued ahead of its scheduled instant, with the pool and priority of its job.

    ``job_id`` and ``run_key``: the run the ledger entry names (empty for a run known only by its
    instant); a scheduled run's key is :func:`jobsched.core.ids.run_key_for` of its instant alone."""

    tenant: str
    pool: str
    priority: str
    at: datetime
    job_id: str = ""
    run_key: str = ""

    @property
    def scheduled(self) -> bool:
        """A scheduled (or catch-up) occurrence: its key is its instant's, no trigger suffix."""
        return bool(self.job_id) and len(self.run_key) == _KEY_CHARS


@dataclass
class Lane:
    """One (pool, priority)'s minutes: ``counts[i]`` runs due in minute ``i`` of the window and
    ``bursts[i]`` the most due in one second of it."""

    pool: str
    priority: str
    counts: list[int] = field(default_factory=lambda: [0] * WINDOW_MINUTES)
    bursts: list[int] = field(default_factory=lambda: [0] * WINDOW_MINUTES)

    @property
    def queue(self) -> str:
        return queue_for(self.pool, self.priority)


@dataclass
class Forecast:
    """Runs due per minute from ``start`` (the current minute, UTC) for :data:`WINDOW_MINUTES`."""

    start: datetime
    lanes: dict[tuple[str, str], Lane] = field(default_factory=dict)
    #: ``(pool, priority, minute, second) -> runs``: what makes the bursts, dropped after building
    _seconds: dict[tuple[str, str, int, int], int] = field(default_factory=dict, repr=False)

    def add(self, pool: str, priority: str, at: datetime) -> None:
        """Count one run due at ``at`` (ignored outside the window)."""
        offset = at - self.start
        minute = int(offset // _MINUTE)
        if not 0 <= minute < WINDOW_MINUTES:
            return
        lane = self.lanes.get((pool, priority))
        if lane is None:
            lane = self.lanes[(pool, priority)] = Lane(pool, priority)
        lane.counts[minute] += 1
        second = int((offset - minute * _MINUTE).total_seconds())
        key = (pool, priority, minute, second)
        self._seconds[key] = self._seconds.get(key, 0) + 1
        lane.bursts[minute] = max(lane.bursts[minute], self._seconds[key])

    @property
    def total(self) -> int:
        return sum(sum(lane.counts) for lane in self.lanes.values())

    def to_dict(self) -> dict[str, Any]:
        """The API's JSON shape: ``start``, ``minutes`` (60 UTC minute starts) and one entry per lane."""
        return {
            "start": to_iso(self.start),
            "minutes": [to_iso(self.start + i * _MINUTE) for i in range(WINDOW_MINUTES)],
            "total": self.total,
            "lanes": [
                {
                    "pool": lane.pool,
                    "priority": lane.priority,
                    "queue": lane.queue,
                    "counts": list(lane.counts),
                    "bursts": list(lane.bursts),
                    "total": sum(lane.counts),
                }
                for _, lane in sorted(self.lanes.items())
            ],
        }


def window_start(now: datetime) -> datetime:
    """The start of ``now``'s minute, UTC: minute 0 of the forecast."""
    return require_aware(now, "now").astimezone(UTC).replace(second=0, microsecond=0)


def parse_entry(entry: str) -> tuple[datetime, str, str] | None:
    """``(scheduled instant, job id, run key)`` of a ledger entry ``<run_key>#<job_id>``; None if
    malformed."""
    key, sep, job_id = entry.rpartition("#")
    if not sep or len(key) < _KEY_CHARS:
        return None
    try:
        at = datetime.strptime(key[:_KEY_CHARS], "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return at, job_id, key


def build_forecast(now: datetime, queued: Iterable[Queued], jobs: Iterable[JobView]) -> Forecast:
    """The forecast at ``now``: ``queued`` runs due after ``now`` at their instants, and each job's fires
    from its cursor on (at or after ``now``) to the end of the window, at most
    :data:`MAX_FIRES_PER_JOB` per job. A run named twice (same job and run key) counts once, and a
    job's fire counts nothing when ``queued`` holds that job's scheduled run at that instant (the
    occurrence was dispatched between the reads of the two sources: module docstring)."""
    forecast = Forecast(start=window_start(now))
    end = forecast.start + WINDOW_MINUTES * _MINUTE
    seen: set[tuple[str, str, str]] = set()
    dispatched: set[tuple[str, str, datetime]] = set()
    for run in queued:
        if not now <= run.at < end:
            continue
        if run.job_id:
            if (run.tenant, run.job_id, run.run_key) in seen:
                continue
            seen.add((run.tenant, run.job_id, run.run_key))
            if run.scheduled:
                dispatched.add((run.tenant, run.job_id, run.at))
        forecast.add(run.pool, run.priority, run.at)
    for job in jobs:
        if job.schedule is None or job.next_due_at is None or job.next_due_at >= end:
            continue
        after = max(job.next_due_at - _EPSILON, now - _EPSILON)
        for count, fire in enumerate(iter_fires(job.schedule, after)):
            if fire.at >= end or count >= MAX_FIRES_PER_JOB:
                break
            if dispatched and (job.tenant, job.job_id, fire.at) in dispatched:
                continue
            forecast.add(job.pool, job.priority, fire.at)
    forecast._seconds.clear()
    return forecast


def needed_concurrency(count: int, burst: int, run_seconds: float, start_within: float) -> int:
    """The concurrency that starts every run of a minute within ``start_within`` seconds of its due
    instant when each runs ``run_seconds``: a minute's runs spread over it need
    ``count × run_seconds ÷ 60`` slots; a burst due in one second needs ``burst × run_seconds ÷
    start_within`` (one slot starts ``start_within ÷ run_seconds`` runs in turn); never more than the
    minute's runs. 0 for an empty minute. (Runs longer than a minute also hold slots in the minutes
    after theirs: :func:`pool_needs` adds those.)"""
    if count <= 0:
        return 0
    spread = count * run_seconds / 60.0
    peak = min(burst, burst * run_seconds / max(start_within, 0.001))
    return min(count, max(1, math.ceil(max(spread, peak))))


def pool_needs(
    forecast: Forecast, run_seconds: Mapping[str, float], start_within: float
) -> dict[str, list[int]]:
    """Per queue kind, the concurrency each minute of the window needs: :func:`needed_concurrency`, or
    for runs of a minute or more the runs started in the minutes they still run (``run_seconds`` per
    pool, the ``lambda`` pool's figure for a pool not named)."""
    default = run_seconds.get(LAMBDA_POOL, 1.0)
    needs: dict[str, list[int]] = {}
    for lane in forecast.lanes.values():
        seconds = run_seconds.get(lane.pool, default)
        row = needs.setdefault(lane.queue, [0] * WINDOW_MINUTES)
        held = math.ceil(seconds / 60.0) if seconds >= 60 else 1
        for i in range(WINDOW_MINUTES):
            running = sum(lane.counts[max(0, i - held + 1) : i + 1])
            row[i] += max(
                running if held > 1 else 0,
                needed_concurrency(lane.counts[i], lane.bursts[i], seconds, start_within),
            )
    return needs
