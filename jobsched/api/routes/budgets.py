"""Spend caps: ``GET /budget`` (the calling tenant's budget and spend) and
``/admin/tenants/.../budget`` (administrators set, read and clear a tenant's monthly budget). Each
route calls one :class:`jobsched.services.budgets.BudgetService` method (decision 0062)."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path

from jobsched.api.auth import TENANT_PATTERN
from jobsched.api.deps import Admin, BudgetsDep, ClockDep, Tenant
from jobsched.api.limit_schemas import BudgetIn, BudgetList, BudgetOut

TenantPath = Annotated[str, Path(min_length=1, max_length=128, pattern=TENANT_PATTERN.pattern)]

router = Router()


@router.get("/budget", tags=["limits"], summary="The calling tenant's monthly budget and spend")
def own_budget(tenant: Tenant, budgets: BudgetsDep, clock: ClockDep) -> BudgetOut:
    return BudgetOut(**budgets.status(tenant, clock.now()).to_dict())


@router.get("/admin/tenants/budgets", tags=["admin"], summary="Tenants with a budget, and their spend")
def list_budgets(admin: Admin, budgets: BudgetsDep, clock: ClockDep) -> BudgetList:
    return BudgetList(items=[BudgetOut(**s.to_dict()) for s in budgets.list(clock.now())])


@router.get("/admin/tenants/<tenant>/budget", tags=["admin"], summary="A tenant's budget and spend")
def get_budget(tenant: TenantPath, admin: Admin, budgets: BudgetsDep, clock: ClockDep) -> BudgetOut:
    return BudgetOut(**budgets.status(tenant, clock.now()).to_dict())


@router.put("/admin/tenants/<tenant>/budget", tags=["admin"], summary="Set a tenant's monthly budget")
def put_budget(
    tenant: TenantPath,
    body: Annotated[BudgetIn, Body()],
    admin: Admin,
    budgets: BudgetsDep,
    clock: ClockDep,
) -> BudgetOut:
    return BudgetOut(**budgets.set(tenant, body.monthly_usd, clock.now()).to_dict())


@router.delete(
    "/admin/tenants/<tenant>/budget",
    tags=["admin"],
    summary="Remove a tenant's budget (no spend cap)",
    responses={204: {"description": "The budget removed"}},
)
def delete_budget(tenant: TenantPath, admin: Admin, budgets: BudgetsDep) -> Response[str]:
    budgets.clear(tenant)
    return Response(status_code=204, content_type=content_types.APPLICATION_JSON, body="")
