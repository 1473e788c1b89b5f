"""The IAM principal -> tenant mapping, and the admin routes that manage it.

Items live in the Leases table under ``lease_key = "principal#<principal>"`` with ``tenant`` and
``updated_at`` (no ``expires_at``, so the table's TTL never removes them). A principal is an IAM ARN
(a role ARN also covers that role's assumed sessions), ``account:<12 digits>`` or ``org:<o-...>``;
see :func:`jobsched.api.auth.principal_candidates` for the lookup order.
"""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Depends, Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from jobsched.api.auth import Identity
from jobsched.api.deps import require_admin
from jobsched.api.schemas import MAX_PRINCIPAL_LENGTH, PrincipalIn, PrincipalList, PrincipalOut
from jobsched.aws.api_stores import PRINCIPAL_PREFIX, PrincipalStore
from jobsched.core.clock import Clock
from jobsched.ports.api import Principals

__all__ = ["PREFIX", "PrincipalStore", "Principals", "admin_router"]

PREFIX = PRINCIPAL_PREFIX


def admin_router(store: Principals, clock: Clock) -> Router:
    """``GET|PUT|DELETE /admin/principals`` — allowed only for JOBSCHED_ADMIN_PRINCIPALS."""
    router = Router()

    @router.get("/admin/principals", tags=["admin"], summary="List principal -> tenant mappings")
    def list_principals(admin: Annotated[Identity, Depends(require_admin)]) -> PrincipalList:
        return PrincipalList(items=[PrincipalOut(**m) for m in store.list()], next_cursor=None)

    @router.put("/admin/principals", tags=["admin"], summary="Map an IAM principal to a tenant")
    def put_principal(
        mapping: Annotated[PrincipalIn, Body()],
        admin: Annotated[Identity, Depends(require_admin)],
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
        admin: Annotated[Identity, Depends(require_admin)],
    ) -> Response[str]:
        store.delete(principal)
        return Response(status_code=204, body="")

    return router
