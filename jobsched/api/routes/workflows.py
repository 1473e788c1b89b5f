"""``/workflows`` (create, list, read, change, delete, pause, resume, run now, backfill, runs) and
``/workflow-runs/{id}`` (read with node states, cancel, retry from failed nodes).

Each route calls one :class:`jobsched.services.workflow_service.WorkflowService` method. A workflow
is a job, so it counts in the tenant's job limit and its versions are ``If-Match`` tokens as a job's.
"""

import hashlib
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Query

from jobsched.api.deps import ClockDep, QuotaDep, Tenant, WorkflowsDep
from jobsched.api.idempotency import check_key
from jobsched.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, page
from jobsched.api.routes.jobs import job_id_of, version_of
from jobsched.api.routes.runs import run_id_of
from jobsched.api.schemas import BackfillIn, DeletedOut, PauseIn, ResumeIn
from jobsched.api.workflow_schemas import (
    WorkflowIn,
    WorkflowList,
    WorkflowOut,
    WorkflowPatch,
    WorkflowRunList,
    WorkflowRunOut,
    WorkflowRunsOut,
    WorkflowTriggerIn,
)
from jobsched.api.workflow_views import workflow_run_summary, workflow_run_view, workflow_view
from jobsched.core.errors import JobschedError, ValidationError

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"page size (default {DEFAULT_LIMIT})")]
Cursor = Annotated[str | None, Query(max_length=2048, description="next_cursor of the previous page")]
IfMatch = Annotated[str | None, Header(description="the workflow's current version, e.g. 3")]
IdemKey = Annotated[str | None, Header(description="repeat-safe key for this request (1-128 chars)")]


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers or {}
    )


def _with_etag(workflow: WorkflowOut, status: int = 200, location: str | None = None) -> Response:
    headers = {"ETag": f'"{workflow.version}"'}
    if location:
        headers["Location"] = location
    return _json(workflow.model_dump(mode="json"), status, headers)


router = Router()


@router.post(
    "/workflows",
    tags=["workflows"],
    summary="Create a workflow (a DAG of nodes, scheduled like a job)",
    responses={201: {"description": "Created"}},
)
def create_workflow(
    workflow: Annotated[WorkflowIn, Body()],
    tenant: Tenant,
    workflows: WorkflowsDep,
    quota: QuotaDep,
    clock: ClockDep,
) -> Response[WorkflowOut]:
    now = clock.now()
    # validated once, before the quota is touched: a schedule with no occurrence left is refused
    # before the tenant's job counter is written (a refused request writes nothing)
    checked = workflows.check(workflow.to_domain(), now)
    if quota is not None:
        quota.take(tenant)
    try:
        created = workflows.create(tenant, checked, now)
    except JobschedError:
        if quota is not None:
            quota.give_back(tenant)
        raise
    return _with_etag(workflow_view(created, now), 201, f"/workflows/{created.id}")


@router.get("/workflows", tags=["workflows"], summary="List the tenant's workflows")
def list_workflows(
    tenant: Tenant,
    workflows: WorkflowsDep,
    clock: ClockDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> WorkflowList:
    scope = f"workflows:{tenant}"
    start = decode_cursor(cursor, scope=scope)
    found, last = workflows.list(tenant, limit=limit, cursor=(start or {}).get("after"))
    now = clock.now()
    items = [workflow_view(w, now) for w in found]
    return WorkflowList(**page(items, {"after": last} if last else None, scope=scope))


@router.get("/workflows/<workflow_id>", tags=["workflows"], summary="Read a workflow")
def get_workflow(
    workflow_id: str, tenant: Tenant, workflows: WorkflowsDep, clock: ClockDep
) -> Response[WorkflowOut]:
    return _with_etag(workflow_view(workflows.get(tenant, job_id_of(workflow_id)), clock.now()))


@router.patch("/workflows/<workflow_id>", tags=["workflows"], summary="Change a workflow (If-Match)")
def update_workflow(
    workflow_id: str,
    changes: Annotated[WorkflowPatch, Body()],
    tenant: Tenant,
    workflows: WorkflowsDep,
    clock: ClockDep,
    if_match: IfMatch = None,
) -> Response[WorkflowOut]:
    expected = version_of(if_match)
    try:
        domain = changes.to_domain()
    except ValueError as error:
        raise ValidationError(str(error)) from error
    now = clock.now()
    updated = workflows.update(tenant, job_id_of(workflow_id), domain, expected, now)
    return _with_etag(workflow_view(updated, now))


@router.delete("/workflows/<workflow_id>", tags=["workflows"], summary="Delete a workflow (If-Match)")
def delete_workflow(
    workflow_id: str,
    tenant: Tenant,
    workflows: WorkflowsDep,
    quota: QuotaDep,
    clock: ClockDep,
    if_match: IfMatch = None,
) -> DeletedOut:
    expected = version_of(if_match)
    workflow_id = job_id_of(workflow_id)
    withdrawn = workflows.delete(tenant, workflow_id, clock.now(), expected)
    if quota is not None:
        quota.give_back(tenant)
    return DeletedOut(id=workflow_id, deleted=True, withdrawn_runs=list(withdrawn))


@router.post("/workflows/<workflow_id>/pause", tags=["workflows"], summary="Pause its schedule")
def pause_workflow(
    workflow_id: str,
    tenant: Tenant,
    workflows: WorkflowsDep,
    clock: ClockDep,
    body: Annotated[PauseIn | None, Body()] = None,
) -> WorkflowOut:
    now = clock.now()
    result = workflows.pause(tenant, job_id_of(workflow_id), now, note=body.note if body else None)
    return workflow_view(result.job, now)


@router.post("/workflows/<workflow_id>/resume", tags=["workflows"], summary="Resume its schedule")
def resume_workflow(
    workflow_id: str,
    tenant: Tenant,
    workflows: WorkflowsDep,
    clock: ClockDep,
    body: Annotated[ResumeIn | None, Body()] = None,
) -> WorkflowOut:
    now = clock.now()
    policy = body.misfire_policy if body else None
    return workflow_view(workflows.resume(tenant, job_id_of(workflow_id), now, misfire_policy=policy), now)


@router.post(
    "/workflows/<workflow_id>/runs",
    tags=["workflows"],
    summary="Start a workflow run now (Idempotency-Key makes a retry reuse the run)",
    responses={201: {"description": "Workflow run created"}},
)
def trigger_workflow(
    workflow_id: str,
    tenant: Tenant,
    workflows: WorkflowsDep,
    clock: ClockDep,
    body: Annotated[WorkflowTriggerIn | None, Body()] = None,
    idempotency_key: IdemKey = None,
) -> Response[WorkflowRunOut]:
    nonce = None
    if idempotency_key is not None:
        nonce = hashlib.sha256(check_key(idempotency_key).encode()).hexdigest()[:32]
    now = clock.now()
    payload = body.payload if body else None
    run = workflows.trigger(tenant, job_id_of(workflow_id), now, payload=payload, nonce=nonce)
    view = workflow_run_view(workflows.run(tenant, run.id))
    return _json(view.model_dump(mode="json"), 201, {"Location": f"/workflow-runs/{run.id}"})


@router.post(
    "/workflows/<workflow_id>/backfill",
    tags=["workflows"],
    summary="One workflow run per occurrence in [from, to]",
    responses={201: {"description": "Workflow runs created"}},
)
def backfill_workflow(
    workflow_id: str,
    window: Annotated[BackfillIn, Body()],
    tenant: Tenant,
    workflows: WorkflowsDep,
    clock: ClockDep,
) -> Response[WorkflowRunsOut]:
    runs = workflows.backfill(tenant, job_id_of(workflow_id), window.from_, window.to, clock.now())
    body = WorkflowRunsOut(runs=[workflow_run_summary(r) for r in runs])
    return _json(body.model_dump(mode="json"), 201)


@router.get("/workflows/<workflow_id>/runs", tags=["workflows"], summary="A workflow's runs, newest first")
def workflow_runs(
    workflow_id: str,
    tenant: Tenant,
    workflows: WorkflowsDep,
    limit: Limit = DEFAULT_LIMIT,
    cursor: Cursor = None,
) -> WorkflowRunList:
    workflow_id = job_id_of(workflow_id)
    scope = f"workflow-runs:{tenant}:{workflow_id}"
    start = decode_cursor(cursor, scope=scope)
    runs, last = workflows.runs(tenant, workflow_id, limit=limit, cursor=(start or {}).get("after"))
    items = [workflow_run_summary(r) for r in runs]
    return WorkflowRunList(**page(items, {"after": last} if last else None, scope=scope))


@router.get("/workflow-runs/<run_id>", tags=["workflows"], summary="A workflow run with its nodes' states")
def get_workflow_run(run_id: str, tenant: Tenant, workflows: WorkflowsDep) -> WorkflowRunOut:
    return workflow_run_view(workflows.run(tenant, run_id_of(run_id)))


@router.post(
    "/workflow-runs/<run_id>/cancel",
    tags=["workflows"],
    summary="Cancel a workflow run (running nodes see the flag, pending ones end cancelled)",
)
def cancel_workflow_run(
    run_id: str, tenant: Tenant, workflows: WorkflowsDep, clock: ClockDep
) -> WorkflowRunOut:
    return workflow_run_view(workflows.cancel(tenant, run_id_of(run_id), clock.now()))


@router.post(
    "/workflow-runs/<run_id>/retry",
    tags=["workflows"],
    summary="Retry a failed workflow run from its failed nodes (succeeded nodes do not run again)",
)
def retry_workflow_run(
    run_id: str, tenant: Tenant, workflows: WorkflowsDep, clock: ClockDep
) -> WorkflowRunOut:
    return workflow_run_view(workflows.retry(tenant, run_id_of(run_id), clock.now()))
