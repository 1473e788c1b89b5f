"""``/handlers``: the registered handler versions and what refers to each, draining marks (admin) and
the record of forced deploy-checks (admin). Each route calls one
:class:`jobsched.services.handlers.HandlerService` method (docs/api.md, decision 0049)."""

import re
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from jobsched.api.deps import Admin, Caller, ClockDep, HandlersDep, tenant_of
from jobsched.api.errors import ForbiddenError
from jobsched.api.handler_schemas import (
    DeployCheckIn,
    DeployCheckList,
    DeployCheckOut,
    HandlersOut,
    HandlerVersionOut,
)
from jobsched.core.errors import NotFoundError

router = Router()

_VERSION = re.compile(r"^[1-9][0-9]{0,6}$")
Scope = Annotated[
    Literal["tenant", "all"] | None,
    Query(
        description="all: every tenant's jobs and runs (administrators only); default: the caller's tenant"
    ),
]


@router.get("/handlers", tags=["handlers"], summary="Registered handler versions and what refers to them")
def list_handlers(caller: Caller, handlers: HandlersDep, scope: Scope = None) -> HandlersOut:
    if scope == "all":
        if not caller.is_admin:
            raise ForbiddenError(f"principal {caller.principal} is not an administrator: scope=all is theirs")
        return HandlersOut(**handlers.overview(None))
    return HandlersOut(**handlers.overview(tenant_of(caller)))


def version_of(name: str, version: str) -> int:
    """A path's version number; one that cannot exist is simply not found."""
    if not _VERSION.match(version):
        raise NotFoundError(f"handler {name[:128]!r} has no version {version[:20]!r}")
    return int(version)


@router.post(
    "/handlers/<name>/versions/<version>/drain",
    tags=["handlers"],
    summary="Mark a handler version draining: no new job may pin it",
)
def drain(name: str, version: str, admin: Admin, handlers: HandlersDep, clock: ClockDep) -> HandlerVersionOut:
    marked = handlers.drain(name, version_of(name, version), now=clock.now(), by=admin.principal)
    return HandlerVersionOut(**marked)


@router.delete(
    "/handlers/<name>/versions/<version>/drain",
    tags=["handlers"],
    summary="Remove a handler version's draining mark",
)
def undrain(name: str, version: str, admin: Admin, handlers: HandlersDep) -> HandlerVersionOut:
    return HandlerVersionOut(**handlers.undrain(name, version_of(name, version)))


@router.post(
    "/handlers/deploy-checks",
    tags=["handlers"],
    summary="Record a deploy that went on despite the pre-deploy check (--force)",
    responses={201: {"description": "Recorded"}},
)
def record_deploy_check(
    body: Annotated[DeployCheckIn, Body()], admin: Admin, handlers: HandlersDep, clock: ClockDep
) -> Response[Any]:
    data: dict[str, Any] = body.model_dump()
    recorded = DeployCheckOut(**handlers.record_deploy_check(data, now=clock.now(), by=admin.principal))
    return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=recorded.model_dump())


@router.get("/handlers/deploy-checks", tags=["handlers"], summary="The forced deploy-checks recorded")
def list_deploy_checks(admin: Admin, handlers: HandlersDep) -> DeployCheckList:
    return DeployCheckList(items=[DeployCheckOut(**c) for c in handlers.deploy_checks()])
