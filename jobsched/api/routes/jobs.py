"""``/jobs``: create (with ``Idempotency-Key``), list, read, update and delete (with ``If-Match``),
pause, resume, trigger now, backfill, and a job's runs. Each route calls one job service method."""

import hashlib
import re
from datetime import UTC, datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

from jobsched.api.deps import BackfillsDep, ClockDep, IdempotencyDep, JobsDep, QuotaDep, Tenant
from jobsched.api.errors import BadRequestError, PreconditionRequiredError, error_body
from jobsched.api.history_schemas import HistoryOut, history_view
from jobsched.api.idempotency import (
    Claim,
    IdempotencyStore,
    IdempotentJobDeletedError,
    StoredResponse,
    check_key,
    fingerprint,
)
from jobsched.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, page
from jobsched.api.quotas import JobQuota
from jobsched.api.schemas import (
    BackfillIn,
    BackfillOut,
    DeletedOut,
    Instant,
    JobIn,
    JobList,
    JobOut,
    JobPatch,
    PausedOut,
    PauseIn,
    ResumeIn,
    RunList,
    RunOut,
    RunsOut,
    TriggerIn,
)
from jobsched.api.views import backfill_view, job_view, run_view
from jobsched.aws.jobs_store import JobExistsError
from jobsched.core.backfills import SYNC_MAX_OCCURRENCES
from jobsched.core.clock import Clock
from jobsched.core.errors import JobschedError, NotFoundError, ValidationError
from jobsched.core.models import Job, to_iso
from jobsched.services.job_history import job_history
from jobsched.services.jobs import JobService

_JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_BACKFILL_ID = re.compile(r"^b[0-9a-f]{24}$")
_VERSION = re.compile(r'^(?:W/)?"?(\d{1,18})"?$')
#: The instants ``until`` may be (an offset next to year 1 or 9999 would leave what UTC can hold).
_IN_RANGE = (datetime(1, 1, 2, tzinfo=UTC), datetime(9998, 12, 31, 23, 59, 59, tzinfo=UTC))

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"page size (default {DEFAULT_LIMIT})")]
Cursor = Annotated[str | None, Query(max_length=2048, description="next_cursor of the previous page")]
IfMatch = Annotated[str | None, Header(description="the job's current version, e.g. 3")]
IdemKey = Annotated[str | None, Header(description="repeat-safe key for this request (1-128 chars)")]


def job_id_of(job_id: str) -> str:
    """A path job id; one that cannot exist is simply not found."""
    if not _JOB_ID.match(job_id):
        raise NotFoundError(f"job {job_id[:80]} not found")
    return job_id


def version_of(if_match: str | None) -> int:
    if if_match is None or not if_match.strip():
        raise PreconditionRequiredError("send If-Match: <version> (the job's current version)")
    match = _VERSION.match(if_match.strip())
    if not match:
        raise BadRequestError(f"If-Match must be the job's version number, got {if_match[:40]!r}")
    return int(match.group(1))


def _with_etag(job: JobOut, status: int = 200) -> Response:
    """The job with ``ETag: "<version>"``, the value a later ``If-Match`` sends back."""
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=job.model_dump(mode="json"),
        headers={"ETag": f'"{job.version}"'},
    )


def _created(body: Any, location: str | None = None, *, replayed: bool = False) -> Response:
    headers = {"Location": location} if location else {}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


def _replay(stored: StoredResponse) -> Response:
    """The response stored for an ``Idempotency-Key``, answered again. The one error stored for a key
    is the 409 of a create whose job was deleted before its answer was stored: it is raised again."""
    if stored.status != 201:
        raise IdempotentJobDeletedError(stored.body["message"])
    return _created(stored.body, f"/jobs/{stored.body['id']}", replayed=True)


router = Router()
#: ``GET /jobs/{id}/backfills/{backfill_id}``: included when the API has a backfill service.
backfill_router = Router()
#: ``GET /jobs/{id}/runs`` (its own router only to keep the routes, and the OpenAPI document, in order).
history_router = Router()


def _create(
    jobs: JobService,
    quota: JobQuota | None,
    clock: Clock,
    tenant: str,
    job: JobIn,
    job_id: str | None = None,
) -> tuple[Job, bool]:
    """Create within the tenant's job limit: (the job, whether an earlier request created it).

    The definition is checked first, once (the job service stores what was checked), so a bad one
    costs no write at all. A create that is refused gives its slot back; one that fails otherwise (a
    timeout: the job may be written) keeps it, so the count errs high, never low. A job found stored
    under the id was written either by this call (the SDK retried its put: it keeps the slot) or by an
    earlier request with the same ``Idempotency-Key``, which took a slot for it (this call's goes back).
    """
    now = clock.now()
    checked = jobs.check(job.to_domain(), now)
    if quota is not None:
        quota.take(tenant)
    try:
        return jobs.create(tenant, checked, now, job_id=job_id), False
    except JobExistsError as exists:
        found = jobs.finish_create(tenant, exists.job_id, now)
        if to_iso(found.created_at) == to_iso(now):
            return found, False
        if quota is not None:
            quota.give_back(tenant)
        return found, True
    except JobschedError:
        if quota is not None:
            quota.give_back(tenant)
        raise


def _resume_claim(
    jobs: JobService,
    quota: JobQuota | None,
    idempotency: IdempotencyStore,
    clock: Clock,
    tenant: str,
    key: str,
    job: JobIn,
    claim: Claim,
) -> tuple[Job, bool]:
    """Finish a create whose first attempt did not: answer with its job if it wrote one (it counts
    in the limit already), refuse if that job was deleted since, else create it."""
    now = clock.now()
    try:
        return jobs.finish_create(tenant, claim.job_id, now), True
    except NotFoundError:
        pass
    if idempotency.was_deleted(tenant, claim.job_id, now):
        gone = IdempotentJobDeletedError(
            f"job {claim.job_id}, created by an earlier request with this Idempotency-Key, has "
            "been deleted since; use a new key to create the job again"
        )
        idempotency.complete(tenant, key, 409, error_body(gone.code, gone.message))
        raise gone
    return _create(jobs, quota, clock, tenant, job, claim.job_id)


@router.post("/jobs", tags=["jobs"], summary="Create a job", responses={201: {"description": "Created"}})
def create_job(
    job: Annotated[JobIn, Body()],
    tenant: Tenant,
    jobs: JobsDep,
    quota: QuotaDep,
    idempotency: IdempotencyDep,
    clock: ClockDep,
    idempotency_key: IdemKey = None,
) -> Response[JobOut]:
    if idempotency_key is None or idempotency is None:
        created, replayed = _create(jobs, quota, clock, tenant, job)
        body = job_view(created, clock.now()).model_dump(mode="json")
        return _created(body, f"/jobs/{created.id}", replayed=replayed)
    key = check_key(idempotency_key)
    digest = fingerprint(job.model_dump(mode="json"))
    claim = idempotency.begin(tenant, key, digest, clock.now(), job_id=jobs.new_id())
    if isinstance(claim, StoredResponse):
        return _replay(claim)
    try:
        if claim.resumed:
            created, replayed = _resume_claim(jobs, quota, idempotency, clock, tenant, key, job, claim)
        else:
            created, replayed = _create(jobs, quota, clock, tenant, job, claim.job_id)
    except IdempotentJobDeletedError:
        raise  # its answer is stored for the key
    except JobschedError:
        idempotency.release(tenant, key)  # refused before anything was written
        raise
    except BaseException:
        idempotency.unlock(tenant, key)  # the job may be written: a retry finds it at once
        raise
    body = job_view(created, clock.now()).model_dump(mode="json")
    idempotency.complete(tenant, key, 201, body)
    return _created(body, f"/jobs/{created.id}", replayed=replayed)


@router.get("/jobs", tags=["jobs"], summary="List the tenant's jobs")
def list_jobs(
    tenant: Tenant, jobs: JobsDep, clock: ClockDep, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None
) -> JobList:
    scope = f"jobs:{tenant}"
    start = decode_cursor(cursor, scope=scope)
    found, last = jobs.list(tenant, limit=limit, cursor=(start or {}).get("after"))
    now = clock.now()
    return JobList(**page([job_view(j, now) for j in found], {"after": last} if last else None, scope=scope))


@router.get("/jobs/<job_id>", tags=["jobs"], summary="Read a job")
def get_job(job_id: str, tenant: Tenant, jobs: JobsDep, clock: ClockDep) -> Response[JobOut]:
    return _with_etag(job_view(jobs.get(tenant, job_id_of(job_id)), clock.now()))


@router.patch("/jobs/<job_id>", tags=["jobs"], summary="Change a job (If-Match: version)")
def update_job(
    job_id: str,
    changes: Annotated[JobPatch, Body()],
    tenant: Tenant,
    jobs: JobsDep,
    clock: ClockDep,
    if_match: IfMatch = None,
) -> Response[JobOut]:
    expected = version_of(if_match)
    try:
        domain_changes = changes.to_domain()
    except ValueError as error:
        raise ValidationError(str(error)) from error
    now = clock.now()
    return _with_etag(job_view(jobs.update(tenant, job_id_of(job_id), domain_changes, expected, now), now))


@router.delete("/jobs/<job_id>", tags=["jobs"], summary="Delete a job (If-Match: version)")
def delete_job(
    job_id: str,
    tenant: Tenant,
    jobs: JobsDep,
    quota: QuotaDep,
    idempotency: IdempotencyDep,
    clock: ClockDep,
    if_match: IfMatch = None,
) -> DeletedOut:
    expected = version_of(if_match)
    job_id = job_id_of(job_id)
    now = clock.now()
    if idempotency is not None:
        # Before the delete: a create of this job retried later under its key must not revive it.
        idempotency.record_deletion(tenant, job_id, now)
    withdrawn = jobs.delete(tenant, job_id, now, expected)
    if quota is not None:
        quota.give_back(tenant)
    return DeletedOut(id=job_id, deleted=True, withdrawn_runs=list(withdrawn))


@router.post("/jobs/<job_id>/pause", tags=["jobs"], summary="Pause; withdraws runs queued ahead")
def pause_job(
    job_id: str,
    tenant: Tenant,
    jobs: JobsDep,
    clock: ClockDep,
    body: Annotated[PauseIn | None, Body()] = None,
) -> PausedOut:
    now = clock.now()
    result = jobs.pause(tenant, job_id_of(job_id), now, note=body.note if body else None)
    return PausedOut(**job_view(result.job, now).model_dump(), withdrawn_runs=list(result.withdrawn))


@router.post("/jobs/<job_id>/resume", tags=["jobs"], summary="Resume (optionally override misfire)")
def resume_job(
    job_id: str,
    tenant: Tenant,
    jobs: JobsDep,
    clock: ClockDep,
    body: Annotated[ResumeIn | None, Body()] = None,
) -> JobOut:
    now = clock.now()
    policy = body.misfire_policy if body else None
    return job_view(jobs.resume(tenant, job_id_of(job_id), now, misfire_policy=policy), now)


@router.post(
    "/jobs/<job_id>/trigger",
    tags=["jobs"],
    summary="Run the job now (Idempotency-Key makes a retry reuse the run)",
    responses={201: {"description": "Run created"}},
)
def trigger_job(
    job_id: str,
    tenant: Tenant,
    jobs: JobsDep,
    clock: ClockDep,
    body: Annotated[TriggerIn | None, Body()] = None,
    idempotency_key: IdemKey = None,
) -> Response[RunOut]:
    nonce = None
    if idempotency_key is not None:
        nonce = hashlib.sha256(check_key(idempotency_key).encode()).hexdigest()[:32]
    payload = body.payload if body else None
    run = jobs.trigger(tenant, job_id_of(job_id), clock.now(), payload=payload, nonce=nonce)
    return _created(run_view(run).model_dump(mode="json"), f"/runs/{run.id}")


@router.post(
    "/jobs/<job_id>/backfill",
    tags=["jobs"],
    summary=f"One run per occurrence in [from, to]: made at once up to {SYNC_MAX_OCCURRENCES} "
    "(201), else in the background (202 with a backfill to follow)",
    responses={
        201: {"description": "Runs created"},
        202: {
            "description": "Backfill accepted: its runs are being made (Location: the backfill)",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/BackfillOut"}}},
        },
    },
)
def backfill_job(
    job_id: str,
    window: Annotated[BackfillIn, Body()],
    tenant: Tenant,
    jobs: JobsDep,
    backfills: BackfillsDep,
    clock: ClockDep,
    idempotency_key: IdemKey = None,
) -> Response[RunsOut | BackfillOut]:
    job_id = job_id_of(job_id)
    now = clock.now()
    key = check_key(idempotency_key) if idempotency_key is not None else None
    job, instants = jobs.backfill_plan(tenant, job_id, window.from_, window.to)
    if backfills is None or len(instants) <= SYNC_MAX_OCCURRENCES:
        runs = jobs.backfill_now(job, instants, now)
        return _created(RunsOut(runs=[run_view(r) for r in runs]).model_dump(mode="json"))
    jobs.refuse_if_capped(tenant, now, f"backfill of {job_id}")  # 409 budget_exhausted, nothing written
    record, created = backfills.start(job, window.from_, window.to, len(instants), now, key)
    headers = {"Location": f"/jobs/{job_id}/backfills/{record.id}"}
    if not created:
        headers["Idempotent-Replayed"] = "true"
    body: Any = backfill_view(record).model_dump(mode="json", by_alias=True)
    return Response(status_code=202, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


@backfill_router.get(
    "/jobs/<job_id>/backfills/<backfill_id>",
    tags=["jobs"],
    summary="An asynchronous backfill's progress",
)
def get_backfill(job_id: str, backfill_id: str, tenant: Tenant, backfills: BackfillsDep) -> BackfillOut:
    if not _BACKFILL_ID.match(backfill_id) or backfills is None:
        raise NotFoundError(f"backfill {backfill_id[:80]} of job {job_id[:80]} not found")
    return backfill_view(backfills.get(tenant, job_id_of(job_id), backfill_id))


@history_router.get(
    "/jobs/<job_id>/runs",
    tags=["jobs"],
    summary="A job's history, newest first (upcoming=true: its runs scheduled later, soonest first)",
)
def job_runs(
    job_id: str,
    tenant: Tenant,
    jobs: JobsDep,
    clock: ClockDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
    upcoming: Annotated[
        bool,
        Query(
            description="false (default): runs scheduled up to now, newest first; true: runs "
            "scheduled after now (queued ahead, or withdrawn by a pause), soonest first"
        ),
    ] = False,
) -> RunList:
    job_id = job_id_of(job_id)
    scope = f"job-runs:{tenant}:{job_id}" + (":upcoming" if upcoming else "")
    start = decode_cursor(cursor, scope=scope)
    runs, last = jobs.runs_of(
        tenant, job_id, limit=limit, cursor=(start or {}).get("after"), now=clock.now(), upcoming=upcoming
    )
    return RunList(**page([run_view(r) for r in runs], {"after": last} if last else None, scope=scope))


@history_router.get(
    "/jobs/<job_id>/history",
    tags=["jobs"],
    summary="A job's history as a grid: its run records by scheduled instant (skipped ones with their "
    "reason), its zone's offset changes, its next fires, and a paused job's resume preview",
)
def job_history_grid(
    job_id: str,
    tenant: Tenant,
    jobs: JobsDep,
    clock: ClockDep,
    until: Annotated[
        Instant | None,
        Query(
            description="records scheduled at or before this instant, with an offset or Z (default, "
            "and at most: now)"
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="cells per page (default 100)")] = 100,
    cursor: Cursor = None,
    upcoming: Annotated[int, Query(ge=0, le=50, description="next fires to add (default 10)")] = 10,
) -> HistoryOut:
    job_id = job_id_of(job_id)
    if until is not None and (until.tzinfo is None or until.utcoffset() is None):
        raise ValidationError("until: needs a UTC offset or Z (e.g. 2026-11-01T00:00:00Z)", field="until")
    if until is not None and not _IN_RANGE[0] <= until <= _IN_RANGE[1]:
        raise ValidationError("until: must be from 0001-01-02 to 9998-12-31 (UTC)", field="until")
    scope = f"job-history:{tenant}:{job_id}"
    start = decode_cursor(cursor, scope=scope)
    history = job_history(
        jobs.jobs,
        jobs.runs,
        tenant,
        job_id,
        now=clock.now(),
        until=until,
        limit=limit,
        cursor=(start or {}).get("after"),
        upcoming_count=upcoming,
    )
    return history_view(history, scope)
