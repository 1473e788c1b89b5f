"""The run records a job's occurrences become, and the message of a run's next attempt. Pure.

Shared by the dispatcher (runs it creates), the API's manual and backfill runs, replays and the
sweeper's re-sends: one definition of a run's id, due instant (the job's deterministic jitter) and
message snapshot.

Every run records the handler its job's target names (``Run.handler``) and, for a job that pins a
version, that version (``Run.handler_version``); an unpinned run is bound by its first attempt's claim
(decision 0048). Every message carries the job's ``payload_version`` and the version the run is bound
to, once it is.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.core.deadlines import deadline_for
from jobsched.core.messages import Outgoing, RunMessage, delay_seconds
from jobsched.core.models import Job, Run, RunState, Trigger, make_run_id
from jobsched.core.policies import jitter_offset
from jobsched.core.pools import LAMBDA_POOL, queue_for


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
        pool=job.pool or LAMBDA_POOL,
        max_attempts=job.retry.max_attempts,
        payload_override=payload_override,
        created_at=now,
        job_version=job.version,
        deadline_at=deadline_for(job, scheduled_at, trigger),
        **handler_fields(job.target),
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
        pool=job.pool or LAMBDA_POOL,
        max_attempts=job.retry.max_attempts,
        skip_reason=reason,
        created_at=now,
        finished_at=now,
        **handler_fields(job.target),
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
        target=bound_target(job.target, run.handler_version),
        payload=run.payload_override if run.payload_override is not None else job.payload,
        payload_version=payload_version_of(job),
        timeout_seconds=job.timeout_seconds,
        retry=job.retry,
        priority=run.priority,
        pool=run.pool,
        notify=job.notify,
        token=run.send_token,
        concurrency=with_key(job.concurrency, job.id),
        rate_limit=with_key(job.rate_limit, job.id),
    )
    return Outgoing(
        queue=queue_for(run.pool, run.priority), message=message, delay_seconds=delay_seconds(run.due_at, now)
    )


def handler_fields(target: dict[str, Any]) -> dict[str, Any]:
    """The ``handler`` and ``handler_version`` a run of ``target`` records at creation: the handler's
    name and the version the target pins (None when unpinned: the first attempt's claim binds it;
    both None for an HTTP target)."""
    name = target.get("handler") if isinstance(target, dict) else None
    if not isinstance(name, str):
        return {"handler": None, "handler_version": None}
    version = target.get("version")
    return {"handler": name, "handler_version": version if isinstance(version, int) else None}


def bound_target(target: dict[str, Any], handler_version: int | None) -> dict[str, Any]:
    """``target`` with the version its run is bound to (a re-sent message of a bound run keeps it)."""
    if handler_version is None or not isinstance(target, dict) or "handler" not in target:
        return target
    return {**target, "version": handler_version}


def payload_version_of(job: Job) -> int | None:
    """The handler version ``job``'s payload was written for: the one recorded when it was checked;
    1 for a handler job written before versions existed (every handler then was version 1); None for
    an HTTP target."""
    if not isinstance(job.target, dict) or "handler" not in job.target:
        return None
    return job.payload_version if job.payload_version is not None else 1


def with_key(limit: dict[str, Any], job_id: str) -> dict[str, Any]:
    """A job's stored limit with its key filled in (the job's id when it names none)."""
    return {"key": job_id, **limit} if limit else {}
