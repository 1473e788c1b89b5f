"""A job's history as a grid: one page of its run records by scheduled instant, the offset changes of
its zone between them, its next fires, and for a paused job what a resume would do under each
misfire policy (``GET /jobs/{id}/history``, decision 0063).

Every occurrence the dispatcher decided is a record in the job's partition of the Runs table, the
skipped ones included (``skipped`` with ``skip_reason``; a long backlog as one summary record with
``skipped_count`` and ``skipped_until``): the page is one Query of that partition, newest first,
bounded by the page size. What is computed (offsets, next fires, the resume preview) comes from the
time core and the dispatcher's planner, with no further read.

Reads per page: the job (one strongly consistent GetItem, which is also the tenant check), one Query
of at most ``limit`` run items, and for a paused job whose overlap policy is not ``allow`` its latest
run (one GetItem), which that policy looks at.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from jobsched.core.history import (
    OffsetChange,
    ResumeOutcome,
    offset_changes,
    resume_preview,
    upcoming,
)
from jobsched.core.models import Job, JobState, Run
from jobsched.core.timeline import Fire
from jobsched.ports.stores import JobRecords, RunRecords


@dataclass(frozen=True)
class HistoryPage:
    """``runs``: the page's records, oldest first; ``cursor``: the last run key read, for the next
    (older) page, None when the history ends there. ``changes``: the zone's offset changes from the
    page's oldest record to its newest record or last upcoming fire."""

    job: Job
    until: datetime
    runs: list[Run]
    cursor: str | None
    changes: list[OffsetChange]
    upcoming: list[Fire]
    resume: list[ResumeOutcome] | None


def job_history(
    jobs: JobRecords,
    runs: RunRecords,
    tenant: str,
    job_id: str,
    *,
    now: datetime,
    until: datetime | None = None,
    limit: int = 100,
    cursor: str | None = None,
    upcoming_count: int = 10,
) -> HistoryPage:
    """One page of the history of ``tenant``'s job ``job_id``: its records scheduled at or before
    ``until`` (default ``now``; a later instant counts as ``now``), newest first from ``cursor`` on,
    returned oldest first.

    The next fires and the resume preview come with the first page only (no ``cursor``, ``until`` not
    given or not before ``now``): they follow the newest records.
    """
    job = jobs.get(tenant, job_id)  # another tenant's job is not found
    end = now if until is None else min(until, now)  # the history is the past: runs queued ahead are upcoming
    page, last = runs.list_for_job(job_id, limit=limit, start_after=cursor, until=end)
    page.reverse()
    latest = cursor is None and end >= now
    fires = upcoming(job, now, upcoming_count) if latest else []
    resume = None
    if latest and job.state is JobState.PAUSED:
        previous = None
        if job.overlap_policy != "allow" and job.last_run_id:
            previous = runs.find(job.last_run_id)
        resume = resume_preview(job, now, previous)
    instants = [r.scheduled_at for r in page] + [f.at for f in fires]
    changes: list[OffsetChange] = []
    if instants:
        changes = offset_changes(ZoneInfo(job.timezone), min(instants), max(instants))
    return HistoryPage(
        job=job, until=end, runs=page, cursor=last, changes=changes, upcoming=fires, resume=resume
    )
