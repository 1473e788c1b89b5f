"""A job's history as a grid (issue 33 §2, decision 0063): the pure parts.

* :func:`offset_changes` — where the job's zone changed its UTC offset (DST, or a change of law)
  between two instants, to the second, so the grid can mark the change between its cells;
* :func:`upcoming` — the next fires after the history, with the time core's DST notes;
* :func:`resume_preview` — what resuming a paused job now would do with the occurrences it missed,
  under each misfire policy. It runs the dispatcher's own planner (:func:`plan_job`, which applies
  :func:`~jobsched.core.misfire.plan_misfires`, the overlap policy and ``dst_gap``) on the job as
  :func:`resumed` makes it, tick after tick at the same instant, exactly as the dispatch that the
  resume starts does: there is no second implementation of the rules.

Pure: time is an argument (aware datetimes only), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from jobsched.core.dispatch_plan import plan_job, schedule_of
from jobsched.core.instants import require_aware
from jobsched.core.misfire import MISFIRE_POLICIES
from jobsched.core.models import Job, JobState, Run, Trigger
from jobsched.core.run_records import new_run
from jobsched.core.timeline import Fire, next_fires

#: The offset is sampled once a day between two instants (then bisected to the second): zones change
#: their offset at most a few times a year, never twice within a day.
_STEP = timedelta(days=1)
#: At most this many days are sampled per call (about 55 years): a page of a yearly job's cells
#: spans its whole history; offset changes older than that within the span are not marked.
MAX_SCAN_DAYS = 20_000
#: A resume preview stops after the planner pass that brings its decided occurrences to this many (a
#: pass reads at most 10,000, so at most about 10,000 are decided): each occurrence costs the planner
#: about 0.13-0.16 ms, so the three policies take under 5 s at worst (docs/performance.md). A longer
#: backlog is previewed in part (``complete`` false); the dispatcher's next ticks decide the rest alike.
MAX_PREVIEW_DECIDED = 9_000
#: Runs listed one by one in a resume preview (the count covers them all).
PREVIEW_RUNS_LISTED = 20
#: Planner passes a preview makes per policy at most: ``run_all`` with ``max_catchup`` 10,000 needs 21
#: (a pass queues at most 500 runs, as a dispatcher tick does); the bound also ends the loop should a
#: pass ever decide nothing.
MAX_PREVIEW_PASSES = 50
_NO_HORIZON = timedelta(0)


@dataclass(frozen=True)
class OffsetChange:
    """The zone's UTC offset changed at ``at`` (the first instant with the new offset)."""

    at: datetime
    before_seconds: int
    after_seconds: int


def offset_seconds(zone: ZoneInfo, at: datetime) -> int:
    """``zone``'s UTC offset at instant ``at``, in seconds."""
    offset = require_aware(at, "at").astimezone(zone).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return int(offset.total_seconds())


def offset_changes(zone: ZoneInfo, start: datetime, end: datetime) -> list[OffsetChange]:
    """The offset changes of ``zone`` in ``(start, end]``, oldest first; only the last
    :data:`MAX_SCAN_DAYS` days of the span are searched."""
    require_aware(start, "start")
    require_aware(end, "end")
    start = max(start, end - MAX_SCAN_DAYS * _STEP)
    changes: list[OffsetChange] = []
    low, low_offset = start, offset_seconds(zone, start)
    while low < end:
        high = min(low + _STEP, end)
        high_offset = offset_seconds(zone, high)
        if high_offset != low_offset:
            changes.append(_bisect(zone, low, high, low_offset))
        low, low_offset = high, high_offset
    return changes


def _bisect(zone: ZoneInfo, low: datetime, high: datetime, before: int) -> OffsetChange:
    """The first whole second in ``(low, high]`` with another offset than ``before`` (``high`` has one)."""
    second = timedelta(seconds=1)
    while high - low > second:
        middle = low + (high - low) / 2
        if offset_seconds(zone, middle) == before:
            low = middle
        else:
            high = middle
    at = high.replace(microsecond=0)
    if offset_seconds(zone, at) == before:
        at += second
    return OffsetChange(at=at, before_seconds=before, after_seconds=offset_seconds(zone, at))


def upcoming(job: Job, now: datetime, count: int) -> list[Fire]:
    """The next ``count`` fires of ``job`` with their DST notes: an active job's from its next due
    occurrence (which may lie in the past while a backlog is dispatched) or after ``now``, as the job's
    ``next_fire_times``; a paused job's after ``now`` (what it fires once resumed, after the missed
    occurrences); none for a completed job or ``count`` 0."""
    require_aware(now, "now")
    if count < 1 or job.state is JobState.COMPLETED:
        return []
    if job.state is JobState.ACTIVE:
        if job.next_due_at is None:
            return []
        after = min(job.next_due_at, now) - timedelta(milliseconds=1)
    else:
        after = now
    return next_fires(schedule_of(job), after, count)


def resumed(job: Job, now: datetime, misfire_policy: str | None) -> Job:
    """``job`` as a resume at ``now`` writes it (the caller checks that it is paused): active again
    (completed when it has nothing left to fire), ``misfire_policy`` overriding the job's own for
    the occurrences missed while paused."""
    state = JobState.ACTIVE if job.next_due_at or job.buffered_at else JobState.COMPLETED
    return replace(
        job,
        state=state,
        paused_note=None,
        paused_at=None,
        misfire_override=misfire_policy,
        version=job.version + 1,
        updated_at=now,
    )


@dataclass
class ResumeOutcome:
    """What resuming at ``now`` under ``policy`` does with the occurrences due by then.

    ``runs``: the first :data:`PREVIEW_RUNS_LISTED` runs it queues, oldest first, with their trigger
    (``catchup`` when late by more than the misfire grace, else ``schedule``); ``runs_count`` all of
    them. ``skipped``: occurrences recorded skipped, by reason (``misfire``, ``dst_gap``, ``overlap``,
    ``replaced``), from ``skipped_first`` to ``skipped_last``. ``next_at``: the occurrence the job's
    cursor stops at, the first after ``now`` (None: the schedule has no more). ``decided``: how many
    occurrences were decided; ``complete`` false when the backlog is longer than
    :data:`MAX_PREVIEW_DECIDED` (the preview stopped there): the later ones are decided the same way by
    the following ticks.
    """

    policy: str
    runs: list[tuple[datetime, Trigger]] = field(default_factory=list)
    runs_count: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_first: datetime | None = None
    skipped_last: datetime | None = None
    next_at: datetime | None = None
    decided: int = 0
    complete: bool = True

    @property
    def skipped_count(self) -> int:
        return sum(self.skipped.values())

    def _skip(self, reason: str, count: int, first: datetime, last: datetime) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count
        self.skipped_first = first if self.skipped_first is None else min(self.skipped_first, first)
        self.skipped_last = last if self.skipped_last is None else max(self.skipped_last, last)


def resume_preview(
    job: Job,
    now: datetime,
    previous: Run | None,
    *,
    max_decided: int = MAX_PREVIEW_DECIDED,
    max_passes: int = MAX_PREVIEW_PASSES,
) -> list[ResumeOutcome]:
    """For each misfire policy, what a resume of the paused ``job`` at ``now`` would do (``previous``:
    its latest run, which the overlap policies other than ``allow`` look at, as the dispatcher does).

    Each outcome comes from the dispatcher's planner run on :func:`resumed` ``(job, now, policy)``
    with no look-ahead, tick after tick (each tick's fired run the next one's previous run) until
    the job's cursor is past ``now`` (or ``max_decided`` occurrences or ``max_passes`` passes, then
    ``complete`` is false) — the runs queued ahead of their instant afterwards are the same under every
    policy, and are the :func:`upcoming` ones.
    """
    require_aware(now, "now")
    return [_outcome(job, now, previous, policy, max_decided, max_passes) for policy in MISFIRE_POLICIES]


def _outcome(
    job: Job, now: datetime, previous: Run | None, policy: str, max_decided: int, max_passes: int
) -> ResumeOutcome:
    outcome = ResumeOutcome(policy=policy)
    current = resumed(job, now, policy)
    for passes in range(1, max_passes + 1):
        plan = plan_job(current, now, _NO_HORIZON, previous, lookahead=_NO_HORIZON)
        if plan.hold:
            break
        for occurrence in plan.fire:
            if len(outcome.runs) < PREVIEW_RUNS_LISTED:
                outcome.runs.append((occurrence.at, occurrence.trigger))
        outcome.runs_count += len(plan.fire)
        for at, reason in plan.skipped:
            outcome._skip(reason, 1, at, at)
        if plan.summary is not None:
            outcome._skip(plan.summary.reason, plan.summary.count, plan.summary.first, plan.summary.last)
        outcome.decided += len(plan.fire) + plan.skipped_count
        if plan.fire:
            last = plan.fire[-1]
            previous = new_run(current, last.at, last.trigger, now)
        current = plan.job
        due = [t for t in (current.next_due_at, current.buffered_at) if t is not None]
        if current.state is not JobState.ACTIVE or not due or min(due) > now:
            break
        if outcome.decided >= max_decided or passes == max_passes:
            outcome.complete = False
            break
    outcome.next_at = current.next_due_at if current.state is JobState.ACTIVE else None
    return outcome
