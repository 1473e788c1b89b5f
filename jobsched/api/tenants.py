"""The IAM principal -> tenant mapping (its admin routes: :mod:`jobsched.api.routes.admin`).

Items live in the Leases table under ``lease_key = "principal#<principal>"`` with ``tenant`` and
``updated_at`` (no ``expires_at``, so the table's TTL never removes them). A principal is an IAM ARN
(a role ARN also covers that role's assumed sessions), ``account:<12 digits>`` or ``org:<o-...>``;
see :func:`jobsched.api.auth.principal_candidates` for the lookup order.
"""

from __future__ import annotations

from jobsched.aws.api_stores import PRINCIPAL_PREFIX, PrincipalStore
from jobsched.ports.api import Principals

__all__ = ["PREFIX", "PrincipalStore", "Principals"]

PREFIX = PRINCIPAL_PREFIX
