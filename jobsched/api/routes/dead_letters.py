"""``/dead-letters``: list (filters), replay one (optionally with a corrected payload), replay by
filter, discard. Each route calls one :class:`jobsched.services.dead_letters.DeadLetterService` method."""

from datetime import datetime
from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from jobsched.api.deps import ClockDep, DeadLettersDep, Tenant
from jobsched.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, page
from jobsched.api.routes.listing import scope_of
from jobsched.api.routes.runs import run_id_of
from jobsched.api.schemas import (
    DeadLetterList,
    DeadLetterOut,
    DeadLetterReason,
    DiscardedOut,
    Instant,
    ReplayFilterIn,
    ReplayIn,
    ReplayResultOut,
    RunOut,
)
from jobsched.api.views import run_view
from jobsched.core.errors import ValidationError
from jobsched.services.dead_letters import DeadLetterFilter

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"page size (default {DEFAULT_LIMIT})")]
Cursor = Annotated[str | None, Query(max_length=2048, description="next_cursor of the previous page")]


def _aware(value: datetime | None, name: str) -> datetime | None:
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise ValidationError(f"{name}: needs a UTC offset or Z (e.g. 2026-11-01T00:00:00Z)", field=name)
    return value


router = Router()


@router.get("/dead-letters", tags=["dead letters"], summary="Failed runs, newest first")
def list_dead_letters(
    tenant: Tenant,
    dead_letters: DeadLettersDep,
    job_id: Annotated[str | None, Query(max_length=64)] = None,
    reason: Annotated[DeadLetterReason | None, Query()] = None,
    error_contains: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    since: Annotated[Instant | None, Query(description="failed at or after (offset or Z)")] = None,
    until: Annotated[Instant | None, Query(description="failed before (offset or Z)")] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> DeadLetterList:
    flt = DeadLetterFilter(
        job_id=job_id,
        reason=reason,
        error_contains=error_contains,
        since=_aware(since, "since"),
        until=_aware(until, "until"),
    )
    scope = scope_of(
        "dead-letters",
        tenant,
        job_id=job_id,
        reason=reason,
        error_contains=error_contains,
        since=since and since.isoformat(),
        until=until and until.isoformat(),
    )
    start = (decode_cursor(cursor, scope=scope) or {}).get("after")
    items, last = dead_letters.list(tenant, flt=flt, limit=limit, cursor=start)
    views = [DeadLetterOut(**item) for item in items]
    return DeadLetterList(**page(views, {"after": last} if last else None, scope=scope))


@router.post("/dead-letters/replay", tags=["dead letters"], summary="Replay every match of a filter")
def replay_matching(
    flt: Annotated[ReplayFilterIn, Body()], tenant: Tenant, dead_letters: DeadLettersDep, clock: ClockDep
) -> ReplayResultOut:
    domain = DeadLetterFilter(
        job_id=flt.job_id,
        reason=flt.reason,
        error_contains=flt.error_contains,
        since=flt.since,
        until=flt.until,
    )
    result = dead_letters.replay_matching(tenant, clock.now(), domain, max_runs=flt.max_runs)
    return ReplayResultOut(**result)


@router.post(
    "/dead-letters/<run_id>/replay", tags=["dead letters"], summary="Replay one (optionally new payload)"
)
def replay_one(
    run_id: str,
    tenant: Tenant,
    dead_letters: DeadLettersDep,
    clock: ClockDep,
    body: Annotated[ReplayIn | None, Body()] = None,
) -> RunOut:
    payload = body.payload if body else None
    return run_view(dead_letters.replay(tenant, run_id_of(run_id), clock.now(), payload=payload))


@router.delete("/dead-letters/<run_id>", tags=["dead letters"], summary="Discard a dead letter")
def discard(run_id: str, tenant: Tenant, dead_letters: DeadLettersDep, clock: ClockDep) -> DiscardedOut:
    dead_letters.discard(tenant, run_id_of(run_id), clock.now())
    return DiscardedOut(run_id=run_id, discarded=True)
