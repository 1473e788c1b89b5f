"""``GET /jobs/{id}/history``: the response models and the mapping from a
:class:`~jobsched.services.job_history.HistoryPage` (decision 0063)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field

from jobsched.api.pagination import encode_cursor
from jobsched.api.schemas import RunStateName
from jobsched.core.history import OffsetChange, ResumeOutcome, offset_seconds
from jobsched.core.instants import to_iso
from jobsched.core.models import Run
from jobsched.core.timeline import Fire
from jobsched.services.job_history import HistoryPage


class HistoryCellOut(BaseModel):
    run_id: str
    scheduled_at: str = Field(description="the scheduled instant, ISO 8601 UTC")
    local: str = Field(description="the same instant on the job's wall clock, with its offset")
    utc_offset_seconds: int
    state: RunStateName
    trigger: str = Field(description="schedule, catchup, manual or backfill")
    skip_reason: str | None = Field(
        default=None,
        description="skipped records: misfire, dst_gap, overlap, replaced, paused, rescheduled or deleted",
    )
    skipped_count: int | None = Field(
        default=None, description="a summary record: how many occurrences it stands for"
    )
    skipped_until: str | None = Field(default=None, description="a summary record: its last occurrence")
    attempt: int
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None


class OffsetChangeOut(BaseModel):
    at: str = Field(description="the first instant with the new UTC offset, ISO 8601 UTC")
    before_seconds: int
    after_seconds: int


class UpcomingOut(BaseModel):
    at: str
    local: str
    note: str | None = Field(description="dst_gap_shifted, dst_overlap_first, dst_overlap_second or null")


class ResumeRunOut(BaseModel):
    at: str
    trigger: str = Field(description="catchup (late by more than the misfire grace) or schedule")


class ResumeOutcomeOut(BaseModel):
    policy: str = Field(description="run_once, run_all or skip")
    job_default: bool = Field(description="the job's own misfire_policy (a resume without an override)")
    runs: list[ResumeRunOut] = Field(description="the first 20 runs it queues, oldest first")
    runs_count: int
    skipped: dict[str, int] = Field(description="occurrences recorded skipped, by reason")
    skipped_count: int
    skipped_first: str | None
    skipped_last: str | None
    next_at: str | None = Field(description="the job's next occurrence afterwards (null: none left)")
    decided: int = Field(description="occurrences the preview decided")
    complete: bool = Field(
        description="false when the backlog is longer than the preview decides (it stops once 9,000 or "
        "more are decided, at most about 10,000, or after 50 planner passes): the dispatcher decides the "
        "rest the same way on its next ticks"
    )


class HistoryOut(BaseModel):
    job_id: str
    timezone: str
    state: str = Field(description="the job's state: active, paused or completed")
    until: str = Field(description="the page holds records scheduled at or before this instant")
    cells: list[HistoryCellOut] = Field(description="one per run record, oldest scheduled first")
    next_cursor: str | None = Field(description="the next, older, page (null: no more)")
    dst_changes: list[OffsetChangeOut] = Field(
        description="the zone's UTC offset changes from the first cell to the last upcoming fire"
    )
    upcoming: list[UpcomingOut] = Field(
        description="first page only: the next fires from the time core (a paused job's: after now)"
    )
    resume_preview: list[ResumeOutcomeOut] | None = Field(
        description="first page of a paused job only: what resuming now does under each misfire policy"
    )


def _opt(value: datetime | None) -> str | None:
    return None if value is None else to_iso(value)


def _cell(run: Run, zone: ZoneInfo) -> HistoryCellOut:
    return HistoryCellOut(
        run_id=run.id,
        scheduled_at=to_iso(run.scheduled_at),
        local=run.scheduled_at.astimezone(zone).isoformat(),
        utc_offset_seconds=offset_seconds(zone, run.scheduled_at),
        state=str(run.state),  # type: ignore[arg-type]
        trigger=str(run.trigger),
        skip_reason=run.skip_reason,
        skipped_count=run.skipped_count,
        skipped_until=_opt(run.skipped_until),
        attempt=run.attempt,
        started_at=_opt(run.started_at),
        finished_at=_opt(run.finished_at),
        error=run.error,
    )


def _change(change: OffsetChange) -> OffsetChangeOut:
    return OffsetChangeOut(
        at=to_iso(change.at), before_seconds=change.before_seconds, after_seconds=change.after_seconds
    )


def _fire(fire: Fire) -> UpcomingOut:
    return UpcomingOut(at=to_iso(fire.at), local=fire.local.isoformat(), note=fire.note)


def _outcome(outcome: ResumeOutcome, default: str) -> ResumeOutcomeOut:
    return ResumeOutcomeOut(
        policy=outcome.policy,
        job_default=outcome.policy == default,
        runs=[ResumeRunOut(at=to_iso(at), trigger=str(trigger)) for at, trigger in outcome.runs],
        runs_count=outcome.runs_count,
        skipped=outcome.skipped,
        skipped_count=outcome.skipped_count,
        skipped_first=_opt(outcome.skipped_first),
        skipped_last=_opt(outcome.skipped_last),
        next_at=_opt(outcome.next_at),
        decided=outcome.decided,
        complete=outcome.complete,
    )


def history_view(history: HistoryPage, scope: str) -> HistoryOut:
    job = history.job
    zone = ZoneInfo(job.timezone)
    cursor = encode_cursor({"after": history.cursor} if history.cursor else None, scope=scope)
    return HistoryOut(
        job_id=job.id,
        timezone=job.timezone,
        state=str(job.state),
        until=to_iso(history.until),
        cells=[_cell(r, zone) for r in history.runs],
        next_cursor=cursor,
        dst_changes=[_change(c) for c in history.changes],
        upcoming=[_fire(f) for f in history.upcoming],
        resume_preview=None
        if history.resume is None
        else [_outcome(o, job.misfire_policy) for o in history.resume],
    )
