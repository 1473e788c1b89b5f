"""Domain objects -> response models: the only place that decides how a job or a run looks on the wire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.api.schemas import AttemptOut, BackfillOut, DeadLetterOut, JobOut, ProgressOut, RunOut, iso_z
from jobsched.core.backfills import Backfill
from jobsched.core.instants import to_iso
from jobsched.core.models import Attempt, Job, JobState, Run
from jobsched.core.pools import LAMBDA_POOL
from jobsched.core.progress import progress_view
from jobsched.core.run_records import with_key
from jobsched.core.schedules import parse_schedule
from jobsched.core.timeline import next_fires

NEXT_FIRE_COUNT = 5
_EPSILON = timedelta(milliseconds=1)


def next_fire_times(job: Job, now: datetime, count: int = NEXT_FIRE_COUNT) -> list[str]:
    """The next ``count`` instants the job will fire at: from its next due occurrence (which may lie in
    the past while a backlog is dispatched), or after ``now``. A paused or completed job fires nothing."""
    if job.state is not JobState.ACTIVE or job.next_due_at is None:
        return []
    schedule = parse_schedule(job.schedule, job.timezone, dst_gap=job.dst_gap, dst_overlap=job.dst_overlap)
    after = min(job.next_due_at, now) - _EPSILON
    return [iso_z(fire.at) for fire in next_fires(schedule, after, count)][:count]


def job_view(job: Job, now: datetime) -> JobOut:
    return JobOut(
        id=job.id,
        state=str(job.state),  # type: ignore[arg-type]
        version=job.version,
        name=job.name,
        schedule=job.schedule,
        timezone=job.timezone,
        target=job.target,
        payload=job.payload,
        priority=job.priority,
        pool=job.pool or LAMBDA_POOL,
        timeout_seconds=job.timeout_seconds,
        retry=job.retry.to_dict(),
        misfire_policy=job.misfire_policy,
        misfire_grace_seconds=job.misfire_grace_seconds,
        max_catchup=job.max_catchup,
        overlap_policy=job.overlap_policy,
        dst_gap=job.dst_gap,
        dst_overlap=job.dst_overlap,
        jitter_seconds=job.jitter_seconds,
        deadline_seconds=job.deadline_seconds,
        description=job.description or "",
        notify=dict(job.notify),
        concurrency=with_key(job.concurrency, job.id),
        rate_limit=with_key(job.rate_limit, job.id),
        paused_note=job.paused_note,
        created_at=iso_z(job.created_at),
        updated_at=iso_z(job.updated_at),
        next_fire_times=next_fire_times(job, now),
        payload_version=job.payload_version,
    )


def _opt(value: datetime | None) -> str | None:
    return iso_z(value) if value is not None else None


def attempt_view(attempt: Attempt) -> AttemptOut:
    return AttemptOut(
        attempt=attempt.attempt,
        started_at=iso_z(attempt.started_at),
        finished_at=_opt(attempt.finished_at),
        outcome=attempt.outcome,
        error=attempt.error,
        handler=attempt.handler,
        handler_version=attempt.handler_version,
        code_version=attempt.code_version,
    )


def run_view(run: Run) -> RunOut:
    return RunOut(
        id=run.id,
        job_id=run.job_id,
        state=str(run.state),  # type: ignore[arg-type]
        trigger=str(run.trigger),
        scheduled_at=iso_z(run.scheduled_at),
        started_at=_opt(run.started_at),
        finished_at=_opt(run.finished_at),
        pool=run.pool,
        priority=run.priority,
        handler=run.handler,
        handler_version=run.handler_version,
        attempt=run.attempt,
        attempts=[attempt_view(a) for a in run.attempts],
        output=run.output if run.output is not None else _output_ref(run),
        expires_at=iso_z(datetime.fromtimestamp(int(run.expires_at), UTC)) if run.expires_at else None,
        error=run.error,
        skip_reason=run.skip_reason,
        skipped_count=run.skipped_count,
        cancel_requested=run.cancel_requested,
        progress=_progress(run.progress),
        replays=list(run.replays),
        waiting_for=run.waiting_for if run.is_active else None,
        waiting_until=_opt(run.waiting_until) if run.is_active and run.waiting_for else None,
        waits=run.waits,
        first_waited_at=_opt(run.first_waited_at),
        deadline_at=_opt(run.deadline_at),
        deadline_missed_at=_opt(run.deadline_missed_at),
    )


def _progress(progress: Any) -> ProgressOut | None:
    """A run's ``{done, total, unit}`` (stored as DynamoDB numbers) as plain integers; none for
    anything stored that is not a progress (:func:`jobsched.core.progress.progress_view`)."""
    view = progress_view(progress)
    return ProgressOut(**view) if view is not None else None


def _output_ref(run: Run) -> Any:
    return {"ref": run.output_ref} if run.output_ref else None


def dead_letter_view(run: Run, job_payload: dict[str, Any] | None) -> DeadLetterOut:
    """A failed run as a dead letter; its payload is the run's override, else its job's payload."""
    payload = run.payload_override if run.payload_override is not None else job_payload
    return DeadLetterOut(
        run_id=run.id,
        job_id=run.job_id,
        error=run.error,
        attempts=[attempt_view(a) for a in run.attempts],
        payload=payload,
        failed_at=_opt(run.dead_lettered_at or run.finished_at),
        replays=list(run.replays),
    )


def backfill_view(record: Backfill) -> BackfillOut:
    return BackfillOut.model_validate(
        {
            "id": record.id,
            "job_id": record.job_id,
            "from": to_iso(record.start),
            "to": to_iso(record.end),
            "state": str(record.state),
            "planned": record.planned,
            "done": record.done,
            "created": record.created,
            "existing": record.existing,
            "sent": record.sent,
            "error": record.error,
            "created_at": to_iso(record.created_at),
            "updated_at": to_iso(record.updated_at),
            "finished_at": to_iso(record.finished_at) if record.finished_at else None,
            "runs": f"/jobs/{record.job_id}/runs",
        }
    )
