"""What one dispatcher tick does with one due job — a pure function of (job, previous run, now).

:func:`plan_job` reads the job's undecided occurrences (from ``next_due_at`` on) through the time
core, applies the misfire policy to the ones already due, the overlap policy to what would fire,
takes the ones inside the look-ahead horizon to enqueue ahead of time, and says where the job's
cursor moves. The dispatcher then performs the plan with conditional writes; because the plan is
recomputed from stored state, a tick that crashed half-way is redone by the next one.

Overlap policies other than ``allow`` need to know whether the previous run is still active. The job
item points at its latest run (``last_run_id``), so that costs one GetItem and only for such jobs.
For them the dispatcher enqueues at most one run ahead of time and, while that run waits for its due
instant, holds the job (decides nothing): "is the previous run still running?" is only answerable
once it has started.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from jobsched.core.models import Job, JobState, Run, RunState, Trigger
from jobsched.core.policies import (
    BUFFER,
    ENQUEUE,
    ENQUEUE_AND_CANCEL_PREVIOUS,
    SKIP,
    SkipSummary,
    decide_overlap,
    plan_misfires,
)
from jobsched.core.schedules import Schedule, parse_schedule
from jobsched.core.timeline import NOTE_SKIPPED, iter_fires

SKIP_REASON_DST_GAP = "dst_gap"
SKIP_REASON_REPLACED = "replaced"
_EPSILON = timedelta(milliseconds=1)
MAX_INDIVIDUAL_SKIPS = 100
#: Runs one advance of a job queues beyond the look-ahead, at most (within the enqueue horizon): a
#: per-minute job with the 900 s horizon is planned 15 runs per advance, so the advance (about 4 WRU
#: and a payload read) is shared by 15 runs. The runs inside the look-ahead are always queued, so a
#: per-second job still queues 60 (the look-ahead), a per-10-second one 15 (150 s): never thousands.
#: A pause withdraws (and an edit re-plans) what is queued, one write per run: docs/decisions/0030.
DEFAULT_BATCH = 15


@dataclass(frozen=True)
class Occurrence:
    at: datetime
    trigger: Trigger = Trigger.SCHEDULE


@dataclass
class JobPlan:
    """``fire``: runs to create and send, oldest first. ``skipped``: (instant, reason) to record as
    skipped runs. ``summary``: one record for many misfire skips. ``cancel_previous``: the stored
    previous run is replaced. ``hold``: decide nothing this tick. ``job``: the job's dispatch
    bookkeeping after the plan (cursor, buffered occurrence, state) — what the advance writes."""

    job: Job
    fire: list[Occurrence] = field(default_factory=list)
    skipped: list[tuple[datetime, str]] = field(default_factory=list)
    summary: SkipSummary | None = None
    cancel_previous: bool = False
    hold: bool = False

    @property
    def skipped_count(self) -> int:
        return len(self.skipped) + (self.summary.count if self.summary else 0)


def schedule_of(job: Job) -> Schedule:
    return parse_schedule(job.schedule, job.timezone, dst_gap=job.dst_gap, dst_overlap=job.dst_overlap)


def first_fire_after(schedule: Schedule, after: datetime) -> datetime | None:
    """The job cursor after ``after``: its first fire *or* DST-skipped occurrence (None when none is left).

    Skipped occurrences count, so the tick that reaches one records it (reason ``dst_gap``).
    """
    for fire in iter_fires(schedule, after, include_skipped=True):
        return fire.at
    return None


class _Reader:
    """Reads real fires after an instant, setting DST-skipped entries aside for the record."""

    def __init__(self, schedule: Schedule, after: datetime):
        self._fires = iter_fires(schedule, after, include_skipped=True)
        self.dst_skips: list[datetime] = []

    def real(self) -> Iterator[datetime]:
        for fire in self._fires:
            if fire.note == NOTE_SKIPPED:
                self.dst_skips.append(fire.at)
            else:
                yield fire.at


def plan_job(
    job: Job,
    now: datetime,
    horizon: timedelta,
    previous: Run | None = None,
    *,
    max_fires: int = 500,
    lookahead: timedelta | None = None,
    batch: int = DEFAULT_BATCH,
) -> JobPlan:
    """Plan one tick for ``job`` at ``now``.

    Occurrences up to ``now + lookahead`` are always enqueued; beyond that, up to ``now + horizon``,
    only while fewer than ``batch`` are enqueued ahead: enough to amortize the job advance over
    several runs of a slow schedule (:data:`DEFAULT_BATCH`) without enqueueing minutes of a fast one.

    Raises ValidationError if the stored schedule became invalid (e.g. a zone removed from tzdata).
    """
    if job.state is not JobState.ACTIVE or (job.next_due_at is None and job.buffered_at is None):
        return JobPlan(job=job, hold=True)
    allow = job.overlap_policy == "allow"
    if not allow and previous is not None and previous.state is RunState.QUEUED and previous.due_at > now:
        return JobPlan(job=job, hold=True)
    schedule = schedule_of(job)
    until = now + horizon
    grace = timedelta(seconds=job.misfire_grace_seconds)
    plan = JobPlan(job=job)
    cursor: datetime | None = job.next_due_at
    due_fires: list[datetime] = []
    ahead: list[datetime] = []
    reader: _Reader | None = None
    if cursor is not None and cursor <= until:
        reader = _Reader(schedule, cursor - _EPSILON)
        real = reader.real()
        misfire = plan_misfires(
            real,
            now,
            policy=job.misfire_override or job.misfire_policy,
            grace=grace,
            max_catchup=job.max_catchup,
            max_individual_skips=MAX_INDIVIDUAL_SKIPS,
            limit=max(10_000, job.max_catchup + 1),
        )
        plan.skipped = [(at, "misfire") for at in misfire.skipped]
        plan.summary = misfire.summary
        due_fires = list(misfire.fire)
        if misfire.truncated:
            resume = misfire.resume_after
            cursor = first_fire_after(schedule, resume) if resume is not None else cursor
        else:
            pending = misfire.next_due
            near = now + (lookahead if lookahead is not None else horizon)
            while (
                pending is not None
                and pending <= until
                and (pending <= near or len(ahead) < batch)
                and len(due_fires) + len(ahead) < max_fires
            ):
                ahead.append(pending)
                pending = next(real, None)
            cursor = pending
    if allow:
        fires = due_fires + ahead
        if len(fires) > max_fires:
            fires = fires[:max_fires]
            cursor = first_fire_after(schedule, fires[-1])
        plan.fire = [_occurrence(at, now, grace) for at in fires]
        updated_buffer = job.buffered_at
    else:
        cursor, updated_buffer = _apply_overlap(plan, job, previous, due_fires, ahead, cursor, now, grace)
    if reader is not None:
        fired = {o.at for o in plan.fire}
        limit = cursor if cursor is not None else datetime.max.replace(tzinfo=now.tzinfo)
        plan.skipped += [
            (at, SKIP_REASON_DST_GAP) for at in reader.dst_skips if at < limit and at not in fired
        ]
        plan.skipped.sort()
    last_fired = max((o.at for o in plan.fire), default=None)
    override_done = job.misfire_override is not None and (cursor is None or cursor > now)
    plan.job = replace(
        job,
        next_due_at=cursor,
        buffered_at=updated_buffer,
        last_fired_at=max(t for t in (last_fired, job.last_fired_at) if t)
        if last_fired
        else job.last_fired_at,
        misfire_override=None if override_done else job.misfire_override,
        state=JobState.ACTIVE if cursor is not None or updated_buffer is not None else JobState.COMPLETED,
        updated_at=now,
    )
    return plan


def _occurrence(at: datetime, now: datetime, grace: timedelta) -> Occurrence:
    return Occurrence(at, Trigger.CATCHUP if now - at > grace else Trigger.SCHEDULE)


def _apply_overlap(
    plan: JobPlan,
    job: Job,
    previous: Run | None,
    due_fires: list[datetime],
    ahead: list[datetime],
    cursor: datetime | None,
    now: datetime,
    grace: timedelta,
) -> tuple[datetime | None, datetime | None]:
    """Sequential overlap decisions; returns (cursor, buffered instant)."""
    active = previous is not None and previous.is_active
    buffered = job.buffered_at
    if buffered is not None and not active:
        decision = decide_overlap(job.overlap_policy, False, True)
        if decision.release_buffered:
            plan.fire.append(Occurrence(buffered, Trigger.SCHEDULE))
            buffered, active = None, True
    for at in due_fires:
        decision = decide_overlap(job.overlap_policy, active, buffered is not None)
        if decision.action == ENQUEUE:
            plan.fire.append(_occurrence(at, now, grace))
            active = True
        elif decision.action == SKIP:
            plan.skipped.append((at, decision.reason or "overlap"))
        elif decision.action == BUFFER:
            buffered = at
        elif decision.action == ENQUEUE_AND_CANCEL_PREVIOUS:
            if plan.fire:  # replaced within this tick: never created, recorded as skipped
                plan.skipped.append((plan.fire.pop().at, SKIP_REASON_REPLACED))
            else:
                plan.cancel_previous = True
            plan.fire.append(_occurrence(at, now, grace))
    if ahead:
        if not active and buffered is None:
            plan.fire.append(Occurrence(ahead[0], Trigger.SCHEDULE))
            rest = ahead[1:]
        else:
            rest = ahead
        if rest:  # undecided: the cursor stays on the first of them
            cursor = rest[0]
    return cursor, buffered
