"""What an edit of a job does to its runs queued ahead of their due instant. Pure.

A run queued ahead carries part of its job's definition: its message holds the target, payload,
timeout, retry policy, priority, pool, ``notify`` and limits
(:func:`jobsched.core.run_records.outgoing_for`), its item the priority, the pool, ``max_attempts``
and the due instant (the job's jitter); the queue it waits in follows the pool. An edit of any of those
(:data:`CARRIED_FIELDS`) must reach the runs already queued, and an edit of the schedule's timing
(:data:`TIMING_FIELDS`) must take back the old schedule's occurrences still ahead: the services decide
each run with :func:`decide_ahead` (docs/decisions/0030-edits-replan-and-the-900-s-horizon.md).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from enum import StrEnum

from jobsched.core.models import Job, Run, Trigger
from jobsched.core.policies import jitter_offset
from jobsched.core.pools import LAMBDA_POOL
from jobsched.core.run_records import handler_fields
from jobsched.core.schedules import Schedule
from jobsched.core.timeline import iter_fires

#: The definition fields a queued run carries (in its message or on its item).
CARRIED_FIELDS = (
    "target",
    "payload",
    "priority",
    "pool",
    "timeout_seconds",
    "retry",
    "notify",
    "concurrency",
    "rate_limit",
    "jitter_seconds",
)
#: The fields that decide when the job's occurrences are.
TIMING_FIELDS = ("schedule", "timezone", "dst_gap", "dst_overlap")
SKIP_REASON_RESCHEDULED = "rescheduled"
_SCHEDULED = (Trigger.SCHEDULE, Trigger.CATCHUP)
_EPSILON = timedelta(milliseconds=1)


class Ahead(StrEnum):
    """What becomes of one run queued ahead when its job is edited."""

    KEEP = "keep"  # nothing it carries changed: its message stands
    REFRESH = "refresh"  # a fresh send token and a message with the edited definition
    RESCHEDULE = "reschedule"  # the new schedule has no occurrence at its instant: skipped, final


def carried_changed(before: Job, after: Job) -> bool:
    """Whether the edit from ``before`` to ``after`` changes anything a queued run carries (a job
    stored before jobs had pools is a ``lambda`` job: its first edit storing ``lambda`` changes none)."""
    return any(_carried(before, name) != _carried(after, name) for name in CARRIED_FIELDS)


def _carried(job: Job, name: str) -> object:
    return (job.pool or LAMBDA_POOL) if name == "pool" else getattr(job, name)


def timing_changed(before: Job, after: Job) -> bool:
    """Whether the edit changes when the job's occurrences are."""
    return any(getattr(before, name) != getattr(after, name) for name in TIMING_FIELDS)


def touches_runs(before: Job, after: Job) -> bool:
    """Whether the edit has anything to do to the runs queued ahead."""
    return carried_changed(before, after) or timing_changed(before, after)


def is_occurrence(schedule: Schedule, at: datetime) -> bool:
    """Whether ``schedule`` fires at exactly ``at`` (an occurrence a DST gap skips does not count)."""
    for fire in iter_fires(schedule, at - _EPSILON):
        return fire.at == at
    return False


def decide_ahead(before: Job, after: Job, run: Run, schedule: Schedule) -> Ahead:
    """The fate of ``run`` (queued ahead) under the edit from ``before`` to ``after`` (whose schedule is
    ``schedule``): a scheduled run at an instant the edited timing has no occurrence at is rescheduled;
    otherwise it is refreshed if the edit changed anything it carries, else kept. Manual and backfill
    runs keep their instant whatever the schedule (they were asked for outside it)."""
    if (
        run.trigger in _SCHEDULED
        and timing_changed(before, after)
        and not is_occurrence(schedule, run.scheduled_at)
    ):
        return Ahead.RESCHEDULE
    if carried_changed(before, after):
        return Ahead.REFRESH
    return Ahead.KEEP


def refreshed(run: Run, job: Job) -> Run:
    """``run`` as ``job`` (the edited definition) would have made it: its priority, its ``max_attempts``
    and its due instant (the scheduled instant plus the job's deterministic jitter; a backfill or replay
    run keeps its due instant, it was due when it was asked for), and the handler (and pinned version)
    the edited target names, unless an attempt already bound the run to a version (a replayed run
    queued again keeps it: decision 0048). Its token is the caller's to renew."""
    due_at = run.due_at
    if run.trigger in (*_SCHEDULED, Trigger.MANUAL):
        due_at = run.scheduled_at + jitter_offset(run.id, job.jitter_seconds)
    handler = handler_fields(job.target) if run.attempt == 0 else {}
    return replace(
        run,
        priority=job.priority,
        pool=job.pool or LAMBDA_POOL,
        max_attempts=job.retry.max_attempts,
        due_at=due_at,
        **handler,
    )
