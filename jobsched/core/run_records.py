"""The run records a job's occurrences become, and the message of a run's next attempt. Pure.

Shared by the dispatcher (runs it creates), the API's manual and backfill runs, replays and the
sweeper's re-sends: one definition of a run's id, due instant (the job's deterministic jitter) and
message snapshot.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.core.messages import Outgoing, RunMessage, delay_seconds
from jobsched.core.models import Job, Run, RunState, Trigger, make_run_id
from jobsched.core.policies import jitter_offset


def new_run(
    job: Job,
    scheduled_at: datetime,
    trigger: Trigger,
    now: datetime,
    *,
    nonce: str | None = None,
    payload_override: dict[str, Any] | None = None,
) -> Run:
    """A queued run of ``job`` for ``scheduled_at``; its due instant adds the job's deterministic jitter."""
    run_id = make_run_id(job.id, scheduled_at, trigger, nonce)
    return Run(
        id=run_id,
        job_id=job.id,
        tenant=job.tenant,
        trigger=trigger,
        scheduled_at=scheduled_at,
        due_at=scheduled_at + jitter_offset(run_id, job.jitter_seconds),
        priority=job.priority,
        max_attempts=job.retry.max_attempts,
        payload_override=payload_override,
        created_at=now,
        job_version=job.version,
    )


def skipped_run(job: Job, scheduled_at: datetime, reason: str, now: datetime) -> Run:
    """A run record of an occurrence deliberately not run (same id as the run it would have been)."""
    return Run(
        id=make_run_id(job.id, scheduled_at),
        job_id=job.id,
        tenant=job.tenant,
        state=RunState.SKIPPED,
        scheduled_at=scheduled_at,
        due_at=scheduled_at,
        priority=job.priority,
        max_attempts=job.retry.max_attempts,
        skip_reason=reason,
        created_at=now,
        finished_at=now,
    )


def outgoing_for(job: Job, run: Run, now: datetime) -> Outgoing:
    """The message for the next attempt of a queued ``run``, with the job's snapshot."""
    message = RunMessage(
        run_id=run.id,
        job_id=job.id,
        tenant=job.tenant,
        attempt=run.attempt + 1,
        scheduled_at=run.scheduled_at,
        due_at=run.due_at,
        target=job.target,
        payload=run.payload_override if run.payload_override is not None else job.payload,
        timeout_seconds=job.timeout_seconds,
        retry=job.retry,
        priority=run.priority,
        notify=job.notify,
        token=run.send_token,
        concurrency=with_key(job.concurrency, job.id),
        rate_limit=with_key(job.rate_limit, job.id),
    )
    return Outgoing(queue=run.priority, message=message, delay_seconds=delay_seconds(run.due_at, now))


def with_key(limit: dict[str, Any], job_id: str) -> dict[str, Any]:
    """A job's stored limit with its key filled in (the job's id when it names none)."""
    return {"key": job_id, **limit} if limit else {}
