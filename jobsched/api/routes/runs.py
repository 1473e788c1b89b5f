"""``/runs``: list (filters ``state``, ``job_id``, ``since``), read, cancel, retry, log lines."""

from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from jobsched.api.deps import ClockDep, RunListingDep, RunLogsDep, RunsDep, Tenant
from jobsched.api.errors import BadRequestError
from jobsched.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, page
from jobsched.api.routes.jobs import job_id_of
from jobsched.api.routes.listing import scope_of
from jobsched.api.schemas import Instant, RetryRunIn, RunList, RunLogLines, RunLogsLink, RunOut, RunStateName
from jobsched.api.views import run_view
from jobsched.aws.outputs import ObjectExpired
from jobsched.core.errors import NotFoundError, ValidationError
from jobsched.core.models import ACTIVE_RUN_STATES, Run, RunState, parse_run_id, tenant_sort_for
from jobsched.core.paging import filtered_page

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"page size (default {DEFAULT_LIMIT})")]
Cursor = Annotated[str | None, Query(max_length=2048, description="next_cursor of the previous page")]


def run_id_of(run_id: str) -> str:
    """A path run id; one that cannot exist is simply not found."""
    try:
        parse_run_id(run_id)
    except ValidationError:
        raise NotFoundError(f"run {run_id[:120]} not found") from None
    return run_id


def _aware(value: datetime | None, name: str) -> datetime | None:
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise ValidationError(f"{name}: needs a UTC offset or Z (e.g. 2026-11-01T00:00:00Z)", field=name)
    return value


router = Router()


@router.get(
    "/runs",
    tags=["runs"],
    summary="The tenant's runs, newest scheduled first",
    description="With state=queued, running or retrying the runs are found through the in-flight "
    "ledger, with state=failed through the dead-letter index (newest dead-lettered first), so the cost "
    "follows the runs in flight or failed, not the history; other states (and no state) are filtered "
    "from the history, at most 1000 runs examined per page: a page may hold fewer than limit items "
    "while next_cursor says more may follow. See docs/api.md, 'Listing by state'.",
)
def list_runs(
    tenant: Tenant,
    runs: RunsDep,
    by_state: RunListingDep,
    state: Annotated[RunStateName | None, Query()] = None,
    job_id: Annotated[str | None, Query(max_length=64)] = None,
    since: Annotated[Instant | None, Query(description="scheduled at or after (offset or Z)")] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> RunList:
    _aware(since, "since")
    store = runs.runs
    scope = scope_of("runs", tenant, state=state, job_id=job_id, since=since and since.isoformat())
    start = (decode_cursor(cursor, scope=scope) or {}).get("after")

    def keep(run: Run) -> bool:
        # Runs carry their tenant: checked per run, so a deleted job's history stays listable
        # and another tenant's job id simply lists nothing.
        return run.tenant == tenant and (state is None or str(run.state) == state)

    if job_id is not None:
        job_id_of(job_id)
    wanted = RunState(state) if state is not None else None
    if not isinstance(start, dict if wanted is RunState.FAILED else str) and start is not None:
        raise BadRequestError("invalid cursor")  # one from before this list's layout
    last: str | dict[str, Any] | None
    if wanted in ACTIVE_RUN_STATES:
        assert wanted is not None and not isinstance(start, dict)
        found, last = by_state.in_flight(tenant, wanted, limit=limit, after=start, job_id=job_id, since=since)
    elif wanted is RunState.FAILED:
        assert not isinstance(start, str)
        found, last = by_state.failed(tenant, limit=limit, after=start, job_id=job_id, since=since)
    elif job_id is not None:
        assert not isinstance(start, dict)

        def fetch_job(n: int, after: str | None) -> tuple[list[Run], str | None]:
            return store.list_for_job(job_id, limit=n, start_after=after, since=since)

        found, key = filtered_page(fetch_job, lambda r: r.run_key, keep, limit=limit, start_after=start)
        last = key
    else:
        assert not isinstance(start, dict)

        def fetch_tenant(n: int, after: str | None) -> tuple[list[Run], str | None]:
            return store.list_for_tenant(tenant, limit=n, start_after=after)

        found, sort = filtered_page(
            fetch_tenant,
            lambda r: tenant_sort_for(r.run_key, r.job_id),
            keep,
            limit=limit,
            start_after=start,
            stop=lambda r: since is not None and r.scheduled_at < since,
        )
        last = sort
    return RunList(**page([run_view(r) for r in found], {"after": last} if last else None, scope=scope))


@router.get("/runs/<run_id>", tags=["runs"], summary="A run with its attempts and output")
def get_run(run_id: str, tenant: Tenant, runs: RunsDep, logs: RunLogsDep) -> RunOut:
    run = runs.get(tenant, run_id_of(run_id))
    view = run_view(run)
    if run.output_ref:
        try:
            view.output = runs.outputs.get_json(run.output_ref)
        except ObjectExpired:  # the bucket's retention removed it: the run itself is still here
            view.output, view.output_expired = None, True
    view.logs = RunLogsLink(**logs.link(run.id))
    return view


@router.get(
    "/runs/<run_id>/logs",
    tags=["runs"],
    summary="The run's log lines (embedded mode only; elsewhere 404: use the run's logs.insights_query)",
)
def get_run_logs(run_id: str, tenant: Tenant, runs: RunsDep, logs: RunLogsDep) -> RunLogLines:
    run = runs.get(tenant, run_id_of(run_id))  # another tenant's run: 404 before any line is read
    return RunLogLines(**logs.lines(run.id))


@router.post("/runs/<run_id>/cancel", tags=["runs"], summary="Cancel a queued, retrying or running run")
def cancel_run(run_id: str, tenant: Tenant, runs: RunsDep, clock: ClockDep) -> RunOut:
    return run_view(runs.cancel(tenant, run_id_of(run_id), clock.now()))


@router.post("/runs/<run_id>/retry", tags=["runs"], summary="Retry a failed run (optionally new payload)")
def retry_run(
    run_id: str,
    tenant: Tenant,
    runs: RunsDep,
    clock: ClockDep,
    body: Annotated[RetryRunIn | None, Body()] = None,
) -> RunOut:
    payload = body.payload if body else None
    return run_view(runs.retry(tenant, run_id_of(run_id), clock.now(), payload=payload))
