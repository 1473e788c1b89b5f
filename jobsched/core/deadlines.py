"""Deadlines: when a scheduled run must have succeeded, and when it missed that (docs/semantics/runs.md,
decision 0058). Pure: time is an argument, items are judged from their stored attributes.

A job (or workflow) with ``deadline_seconds`` > 0 gives each of its *scheduled* runs (trigger
``schedule`` or ``catchup``) a ``deadline_at`` = scheduled instant + ``deadline_seconds``, written on
the run when it is created (an edit of the job does not move the deadline of a run already made).
Manual, backfill and replay runs have none: their scheduled instant is not a promise.

A run *missed* its deadline when, at ``deadline_at``, it had not ended: it was still queued (waiting
for its instant, a limit or a worker), running or retrying. A run that succeeded late, or failed or
was cancelled after the deadline, missed it too; one that ended before it did not (a failure before
the deadline is a dead letter, told as such). A dead letter an operator replayed or retried is no
longer watched: what happens to it next is their action, not the schedule's.

An *occurrence* missed its deadline when the job's ``next_due_at`` (the earliest occurrence not yet
dispatched) is more than ``deadline_seconds`` past: no run was made for it (the dispatcher was down,
its partition stuck). Nothing has a ``deadline_at`` to carry then; the job's own definition is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.instants import from_iso
from jobsched.core.models import Job, Trigger

#: The largest deadline: seven days after the scheduled instant.
MAX_DEADLINE_SECONDS = 7 * 86400
#: Notification type of a missed deadline (dead letters are ``dead_letter``).
DEADLINE_NOTIFICATION = "deadline_missed"
#: Runs of these triggers carry the job's deadline.
_SCHEDULED = (Trigger.SCHEDULE, Trigger.CATCHUP)
#: Run states of a run that had not ended.
_ENDED = ("succeeded", "failed", "cancelled", "skipped")
#: The partition prefix of the once-per-occurrence markers (Runs table): ``deadline#<job id>``.
MARKER_PREFIX = "deadline#"


def validate_deadline(value: Any) -> int:
    """The deadline in whole seconds (0: none); :class:`ValidationError` naming the field otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DEADLINE_SECONDS:
        raise ValidationError(
            f"deadline_seconds must be an integer between 0 (none) and {MAX_DEADLINE_SECONDS} (7 days), "
            f"got {value!r}",
            field="deadline_seconds",
        )
    return value


def deadline_for(job: Job, scheduled_at: datetime, trigger: Trigger) -> datetime | None:
    """The ``deadline_at`` of a run of ``job`` for ``scheduled_at`` (None: the run has none)."""
    if not job.deadline_seconds or Trigger(trigger) not in _SCHEDULED:
        return None
    return scheduled_at + timedelta(seconds=job.deadline_seconds)


def run_missed(item: Mapping[str, Any], now: datetime) -> bool:
    """Whether the run ``item`` (as stored) missed its deadline and is not yet marked so.

    Its ``deadline_at`` has passed at ``now`` and it had not ended by then: active, or ended after it.
    A skipped record never misses (nothing was owed)."""
    deadline = item.get("deadline_at")
    if not deadline or item.get("deadline_missed_at") or item.get("replays"):
        return False  # none, reported already, or an operator replayed or retried it: theirs now
    at = from_iso(deadline)
    if at >= now:
        return False
    state = item.get("state")
    if state not in _ENDED:
        return True
    if state == "skipped":
        return False
    finished = item.get("finished_at")
    return finished is None or from_iso(finished) > at


def overdue_occurrence(job: Job, now: datetime) -> datetime | None:
    """The scheduled instant of ``job``'s occurrence that missed its deadline without a run being made
    (its ``next_due_at`` more than ``deadline_seconds`` before ``now``), or None."""
    if not job.deadline_seconds or job.next_due_at is None or str(job.state) != "active":
        return None
    if job.next_due_at + timedelta(seconds=job.deadline_seconds) >= now:
        return None
    return job.next_due_at


def marker_key(job_id: str, run_key: str) -> dict[str, str]:
    """The key of the once-per-occurrence marker: whichever of the sweeper's two checks (the run, the
    occurrence without a run) writes it first reports the miss; the other finds it and stays quiet."""
    return {"job_id": f"{MARKER_PREFIX}{job_id}", "run_key": run_key}


def deadline_notification_of(item: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of a missed-deadline notification, from the marker item the sweeper wrote.

    Its ``id`` (``<run id>@deadline``) is the same on every delivery try: one notification per
    occurrence."""
    job_id = str(item["job_id"]).removeprefix(MARKER_PREFIX)
    run_id = f"{job_id}.{item['run_key']}"
    return {
        "type": DEADLINE_NOTIFICATION,
        "id": f"{run_id}@deadline",
        "tenant": item.get("tenant"),
        "job_id": job_id,
        "run_id": run_id,
        "scheduled_at": item.get("scheduled_at"),
        "deadline_at": item.get("deadline_at"),
        "missed_at": item.get("missed_at"),
        "state": item.get("run_state"),
        "reason": "the run had not succeeded by its deadline"
        if item.get("run_state")
        else "no run was made for the occurrence by its deadline (dispatch is behind)",
        "run": f"/runs/{run_id}",
    }


def deadline_subject(notification: Mapping[str, Any]) -> str:
    """An SNS subject (ASCII, at most 100 characters)."""
    text = f"jobsched: run of job {notification['job_id']} missed its deadline"
    return text.encode("ascii", "replace").decode()[:100]
