"""Per-tenant limits: ``GET /limits`` (the calling tenant's), ``/admin/tenants/.../limits`` (operators);
``GET /usage``: usage per tenant and day (a tenant's own; an administrator's: every tenant's).

A tenant's limits are set by an administrator (``JOBSCHED_ADMIN_PRINCIPALS``); a tenant may read its
own. Workers see a change within a minute (:mod:`jobsched.aws.tenant_limits`).
"""

import re
from datetime import UTC, timedelta
from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query

from jobsched.api.auth import TENANT_PATTERN, Identity
from jobsched.api.contract import DAY_PATTERN
from jobsched.api.deps import Admin, Caller, ClockDep, Tenant, TenantLimitsDep, UsageDep, WorkerMemoryDep
from jobsched.api.errors import ForbiddenError
from jobsched.api.limit_schemas import DayUsageOut, TenantLimitIn, TenantLimitList, TenantLimitOut, UsageOut
from jobsched.aws.usage_store import MAX_DAYS
from jobsched.core.errors import UnauthorizedError, ValidationError
from jobsched.core.usage import DEPLOYMENT, parse_day

#: ``GET /usage``'s ``tenant``: a tenant, or the deployment row's name (``@deployment``: no tenant's
#: name starts with ``@``).
USAGE_TENANT_PATTERN = rf"{TENANT_PATTERN.pattern}|^{re.escape(DEPLOYMENT)}$"
TenantPath = Annotated[str, Path(min_length=1, max_length=128, pattern=TENANT_PATTERN.pattern)]

#: ``GET /limits`` and ``/admin/tenants/.../limits`` (included with the tenant limits).
router = Router()
#: ``GET /usage`` (included with the usage store).
usage_router = Router()


@router.get("/limits", tags=["limits"], summary="The calling tenant's concurrency and rate limits")
def own_limits(tenant: Tenant, limits: TenantLimitsDep) -> TenantLimitOut:
    return TenantLimitOut(**limits.get(tenant).to_dict())


@router.get("/admin/tenants/limits", tags=["admin"], summary="Tenants with limits of their own")
def list_limits(admin: Admin, limits: TenantLimitsDep) -> TenantLimitList:
    return TenantLimitList(
        items=[TenantLimitOut(**t.to_dict()) for t in limits.list()],
        defaults={
            "max_running": limits.default_max_running or None,
            "runs_per_second": limits.default_per_second or None,
            "burst": limits.default_burst if limits.default_per_second else None,
        },
    )


@router.get("/admin/tenants/<tenant>/limits", tags=["admin"], summary="A tenant's limits")
def get_limits(tenant: TenantPath, admin: Admin, limits: TenantLimitsDep) -> TenantLimitOut:
    return TenantLimitOut(**limits.get(tenant).to_dict())


@router.put("/admin/tenants/<tenant>/limits", tags=["admin"], summary="Set a tenant's own limits")
def put_limits(
    tenant: TenantPath,
    body: Annotated[TenantLimitIn, Body()],
    admin: Admin,
    limits: TenantLimitsDep,
    clock: ClockDep,
) -> TenantLimitOut:
    stored = limits.put(
        tenant,
        clock.now(),
        max_running=body.max_running,
        per_second=body.runs_per_second,
        burst=body.burst,
    )
    return TenantLimitOut(**stored.to_dict())


@router.delete(
    "/admin/tenants/<tenant>/limits",
    tags=["admin"],
    summary="Back to the deployment's default limits",
    responses={204: {"description": "The tenant's own limits removed"}},
)
def delete_limits(tenant: TenantPath, admin: Admin, limits: TenantLimitsDep) -> Response[str]:
    limits.delete(tenant)
    return Response(status_code=204, content_type=content_types.APPLICATION_JSON, body="")


@usage_router.get("/usage", tags=["limits"], summary="Usage per tenant and day")
def usage(
    identity: Caller,
    store: UsageDep,
    clock: ClockDep,
    memory_mb: WorkerMemoryDep,
    from_: Annotated[
        str | None, Query(alias="from", pattern=DAY_PATTERN, description="first UTC day")
    ] = None,
    to: Annotated[str | None, Query(pattern=DAY_PATTERN, description="last UTC day (default today)")] = None,
    tenant: Annotated[
        str | None,
        Query(
            pattern=USAGE_TENANT_PATTERN,
            max_length=128,
            description=f'administrators: one tenant, or "{DEPLOYMENT}" (the deployment row alone)',
        ),
    ] = None,
) -> UsageOut:
    last = parse_day(to, "to") if to else clock.now().astimezone(UTC).date()
    # the default window is the week up to `to`, or from the first day there is (to=0001-01-03
    # made `last - 6 days` overflow: a 500, found by schemathesis)
    first = parse_day(from_, "from") if from_ else last - timedelta(days=min(6, last.toordinal() - 1))
    if first > last:
        raise ValidationError("from must not be after to", field="from")
    if (last - first).days + 1 > MAX_DAYS:
        raise ValidationError(f"at most {MAX_DAYS} days per call", field="from")
    if identity.is_admin and tenant is None:
        days = store.all_days(first, last)
    elif identity.is_admin and tenant is not None:
        days = store.tenant_days(tenant, first, last)
    else:
        own = current_tenant_of(identity)
        if tenant is not None and tenant != own:
            raise ForbiddenError("a tenant sees its own usage only; leave tenant out")
        days = store.tenant_days(own, first, last)
    return UsageOut(
        items=[DayUsageOut(**d.to_dict(memory_mb)) for d in days],
        first_day=first.isoformat(),
        last_day=last.isoformat(),
    )


def current_tenant_of(identity: Identity) -> str:
    if identity.tenant is None:
        raise UnauthorizedError(f"principal {identity.principal} is mapped to no tenant")
    return identity.tenant
