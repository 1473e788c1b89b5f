"""Schedules as code: ``PUT /jobs/by-name/{name}`` and ``PUT /workflows/by-name/{name}`` create or
update by name, idempotently; ``GET /declared`` lists the declared names (``jobsched apply --prune``
reads it). Each route calls one :class:`jobsched.services.declared.DeclaredService` method
(docs/decisions/0060-schedules-as-code.md)."""

from datetime import datetime
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from jobsched.api.declared_schemas import (
    DeclaredJobOut,
    DeclaredList,
    DeclaredNameOut,
    DeclaredWorkflowOut,
    JobPut,
    WorkflowPut,
)
from jobsched.api.deps import ClockDep, JobsDep, QuotaDep, Tenant
from jobsched.api.views import job_view
from jobsched.api.workflow_views import workflow_view
from jobsched.core.dag import is_workflow_target
from jobsched.core.errors import ValidationError
from jobsched.services.declared import Declared, DeclaredService, Outcome

DryRun = Annotated[
    bool, Query(description="true: check the definition and answer what would happen; write nothing")
]

router = Router()


#: A declared name: 1-200 characters, no space at either end (``POST`` strips a name's spaces).
NAME_PATTERN = r"^\S(?:.{0,198}\S)?$"
NamePath = Annotated[
    str,
    Path(min_length=1, max_length=200, pattern=NAME_PATTERN, description="the job's name, percent-encoded"),
]


def _field_first(error: ValidationError) -> ValidationError:
    """The error with its message starting ``<field>: `` (as the schema's 422s do), so a client such as
    ``jobsched apply`` can place it in the declaration it sent."""
    if error.field and not error.message.startswith(f"{error.field}"):
        error.message = f"{error.field}: {error.message}"
        error.args = (error.message,)
    return error


def _declare(
    service: DeclaredService,
    tenant: str,
    name: str,
    body: JobPut | WorkflowPut,
    now: datetime,
    *,
    workflow: bool,
    dry_run: bool,
) -> Declared:
    """Declare ``body`` under the path's ``name``."""
    try:
        return service.put(tenant, name, body.to_domain(), now, workflow=workflow, dry_run=dry_run)
    except ValidationError as error:
        raise _field_first(error) from None


def _answer(result: Declared, body: dict[str, Any], version: int | None) -> Response:
    status = 201 if result.outcome is Outcome.CREATED and result.job is not None else 200
    headers = {"ETag": f'"{version}"'} if version is not None else {}
    return Response(
        status_code=status, content_type=content_types.APPLICATION_JSON, body=body, headers=headers
    )


@router.put(
    "/jobs/by-name/<name>",
    tags=["schedules as code"],
    summary="Create or update a job by its name (the same definition again changes nothing)",
    responses={201: {"description": "Created"}, 200: {"description": "Updated or unchanged"}},
)
def put_job_by_name(
    name: NamePath,
    job: Annotated[JobPut, Body()],
    tenant: Tenant,
    jobs: JobsDep,
    quota: QuotaDep,
    clock: ClockDep,
    dry_run: DryRun = False,
) -> Response[DeclaredJobOut]:
    now = clock.now()
    result = _declare(DeclaredService(jobs, quota), tenant, name, job, now, workflow=False, dry_run=dry_run)
    view = job_view(result.job, now) if result.job is not None else None
    out = DeclaredJobOut(
        name=result.name,
        outcome=result.outcome,
        changed_fields=list(result.changed),
        dry_run=dry_run,
        job=view,
    )
    return _answer(result, out.model_dump(mode="json"), view.version if view else None)


@router.put(
    "/workflows/by-name/<name>",
    tags=["schedules as code"],
    summary="Create or update a workflow by its name (the same definition again changes nothing)",
    responses={201: {"description": "Created"}, 200: {"description": "Updated or unchanged"}},
)
def put_workflow_by_name(
    name: NamePath,
    workflow: Annotated[WorkflowPut, Body()],
    tenant: Tenant,
    jobs: JobsDep,
    quota: QuotaDep,
    clock: ClockDep,
    dry_run: DryRun = False,
) -> Response[DeclaredWorkflowOut]:
    now = clock.now()
    service = DeclaredService(jobs, quota)
    result = _declare(service, tenant, name, workflow, now, workflow=True, dry_run=dry_run)
    view = workflow_view(result.job, now) if result.job is not None else None
    out = DeclaredWorkflowOut(
        name=result.name,
        outcome=result.outcome,
        changed_fields=list(result.changed),
        dry_run=dry_run,
        workflow=view,
    )
    return _answer(result, out.model_dump(mode="json"), view.version if view else None)


@router.get("/declared", tags=["schedules as code"], summary="The names the tenant declared, with their jobs")
def list_declared(tenant: Tenant, jobs: JobsDep) -> DeclaredList:
    items = [
        DeclaredNameOut(
            name=d.name,
            kind="workflow" if is_workflow_target(d.job.target) else "job",
            id=d.job.id,
            version=d.job.version,
        )
        for d in DeclaredService(jobs).names(tenant)
    ]
    return DeclaredList(items=items)
