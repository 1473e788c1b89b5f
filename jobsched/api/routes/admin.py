"""``GET|PUT|DELETE /admin/principals``: the IAM principal -> tenant mapping, for administrators only
(``JOBSCHED_ADMIN_PRINCIPALS``). Each route calls one :class:`jobsched.api.tenants.PrincipalStore`
method."""

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from jobsched.api.deps import Admin, ClockDep, PrincipalsDep
from jobsched.api.schemas import MAX_PRINCIPAL_LENGTH, PrincipalIn, PrincipalList, PrincipalOut

router = Router()


@router.get("/admin/principals", tags=["admin"], summary="List principal -> tenant mappings")
def list_principals(admin: Admin, store: PrincipalsDep) -> PrincipalList:
    return PrincipalList(items=[PrincipalOut(**m) for m in store.list()], next_cursor=None)


@router.put("/admin/principals", tags=["admin"], summary="Map an IAM principal to a tenant")
def put_principal(
    mapping: Annotated[PrincipalIn, Body()], admin: Admin, store: PrincipalsDep, clock: ClockDep
) -> PrincipalOut:
    return PrincipalOut(**store.put(mapping.principal, mapping.tenant, now=clock.now()))


@router.delete(
    "/admin/principals",
    tags=["admin"],
    summary="Remove a principal's mapping",
    responses={204: {"description": "Mapping removed"}},
)
def delete_principal(
    principal: Annotated[str, Query(min_length=1, max_length=MAX_PRINCIPAL_LENGTH, pattern=r"^[!-~]+$")],
    admin: Admin,
    store: PrincipalsDep,
) -> Response[str]:
    store.delete(principal)
    return Response(status_code=204, body="")
