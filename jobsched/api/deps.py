"""Route dependencies (Powertools ``Depends``): the caller's identity, resolved once per request.

The gate in :mod:`jobsched.api.app` authenticates every request before routing and puts the
:class:`~jobsched.api.auth.Identity` in the resolver context; routes take the tenant from here and
pass it to the services. Nothing reads a tenant from the body or the query string.
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler.request import Request

from jobsched.api.auth import Identity
from jobsched.api.errors import ForbiddenError
from jobsched.core.errors import UnauthorizedError

IDENTITY_CONTEXT_KEY = "jobsched_identity"


def current_identity(request: Request) -> Identity:
    identity = request.context.get(IDENTITY_CONTEXT_KEY)
    if not isinstance(identity, Identity):
        raise UnauthorizedError("this route needs an authenticated caller")
    return identity


def current_tenant(request: Request) -> str:
    """The calling tenant; 401 when the identity maps to no tenant."""
    identity = current_identity(request)
    if identity.tenant is None:
        raise UnauthorizedError(
            f"principal {identity.principal} is mapped to no tenant; an administrator maps it with "
            "PUT /admin/principals"
        )
    return identity.tenant


def require_admin(request: Request) -> Identity:
    """The calling administrator; 403 for anyone not listed in JOBSCHED_ADMIN_PRINCIPALS."""
    identity = current_identity(request)
    if not identity.is_admin:
        raise ForbiddenError(f"principal {identity.principal} is not an administrator")
    return identity
