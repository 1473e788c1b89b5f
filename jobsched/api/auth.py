"""Who is calling, and for which tenant.

The tenant always comes from the authenticated identity, never from the body or the query string.
Three modes, chosen by ``JOBSCHED_AUTH_MODE``:

- ``token`` (the embedded mode): ``Authorization: Bearer <token>``; ``JOBSCHED_TENANT_TOKENS`` is a
  JSON object ``{"<token>": "<tenant>"}``. Tokens are compared in constant time.
- ``iam`` (API Gateway IAM/SigV4): ``requestContext.authorizer.iam`` names the caller; the principal
  is mapped to a tenant by the mapping in :mod:`jobsched.api.tenants` (managed by admins).
- ``jwt`` (API Gateway JWT authorizer): the tenant is the claim named by ``JOBSCHED_JWT_TENANT_CLAIM``
  (default ``tenant``) of the validated token.

Administrators (who may manage the principal mapping) are the principals listed, comma separated, in
``JOBSCHED_ADMIN_PRINCIPALS``: IAM ARNs (a role ARN covers its sessions), ``token:<tenant>`` in token
mode, ``jwt:<sub>`` in jwt mode.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from jobsched.core.errors import UnauthorizedError
from jobsched.runtime.resources import ENV_AUTH_MODE, ENV_TENANT_TOKENS

ENV_ADMIN_PRINCIPALS = "JOBSCHED_ADMIN_PRINCIPALS"
ENV_JWT_TENANT_CLAIM = "JOBSCHED_JWT_TENANT_CLAIM"
AUTH_MODES = ("token", "iam", "jwt")
#: As :class:`jobsched.runtime.settings.Settings`:
#: a deployment that names no mode gets IAM, never open tokens.
DEFAULT_AUTH_MODE = "iam"
DEFAULT_JWT_TENANT_CLAIM = "tenant"

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
_ASSUMED_ROLE = re.compile(r"^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/.+$")


@dataclass(frozen=True)
class AuthConfig:
    """How the API authenticates callers (built once per function from the environment)."""

    mode: str
    tokens: Mapping[str, str] = field(default_factory=dict)
    admin_principals: frozenset[str] = frozenset()
    jwt_tenant_claim: str = DEFAULT_JWT_TENANT_CLAIM

    def __post_init__(self) -> None:
        if self.mode not in AUTH_MODES:
            raise ValueError(f"{ENV_AUTH_MODE} must be one of {', '.join(AUTH_MODES)}, got {self.mode!r}")
        if self.mode == "token" and not self.tokens:
            raise ValueError(f"{ENV_TENANT_TOKENS} must map at least one token to a tenant in token mode")
        for tenant in self.tokens.values():
            if not TENANT_PATTERN.match(tenant):
                raise ValueError(f"{ENV_TENANT_TOKENS}: {tenant!r} is not a valid tenant name")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> AuthConfig:
        """Read the auth settings; a bad value raises ``ValueError`` naming the variable."""
        mode = (env.get(ENV_AUTH_MODE, "") or DEFAULT_AUTH_MODE).strip().lower()
        tokens: dict[str, str] = {}
        raw_tokens = env.get(ENV_TENANT_TOKENS, "")
        if raw_tokens:
            try:
                tokens = json.loads(raw_tokens)
            except ValueError as error:
                raise ValueError(f"{ENV_TENANT_TOKENS} must be a JSON object {{token: tenant}}") from error
            if not isinstance(tokens, dict) or not all(
                isinstance(k, str) and k and isinstance(v, str) for k, v in tokens.items()
            ):
                raise ValueError(f"{ENV_TENANT_TOKENS} must be a JSON object {{token: tenant}}")
        admins = frozenset(p.strip() for p in env.get(ENV_ADMIN_PRINCIPALS, "").split(",") if p.strip())
        claim = env.get(ENV_JWT_TENANT_CLAIM, "").strip() or DEFAULT_JWT_TENANT_CLAIM
        return cls(mode=mode, tokens=tokens, admin_principals=admins, jwt_tenant_claim=claim)


@dataclass(frozen=True)
class Identity:
    """The authenticated caller: a principal, its tenant (``None`` when unmapped) and admin right."""

    principal: str
    tenant: str | None
    is_admin: bool = False


class TenantResolver(Protocol):
    """Maps IAM principal candidates (most specific first) to a tenant."""

    def resolve(self, candidates: Sequence[str]) -> str | None: ...


def principal_candidates(iam: Mapping[str, Any]) -> list[str]:
    """The names an IAM caller may be mapped under, most specific first.

    An assumed-role session ``arn:aws:sts::123456789012:assumed-role/Role/session`` is also known as
    its role ``arn:aws:iam::123456789012:role/Role``; then come ``account:<id>`` and ``org:<id>``."""
    candidates: list[str] = []
    user_arn = iam.get("userArn")
    if isinstance(user_arn, str) and user_arn:
        candidates.append(user_arn)
        match = _ASSUMED_ROLE.match(user_arn)
        if match:
            partition, account, role = match.groups()
            candidates.append(f"arn:{partition}:iam::{account}:role/{role}")
    account = iam.get("accountId")
    if isinstance(account, str) and account:
        candidates.append(f"account:{account}")
    org = iam.get("principalOrgId")
    if isinstance(org, str) and org:
        candidates.append(f"org:{org}")
    return candidates


class Authenticator:
    """Turns an API Gateway HTTP API (v2) event into an :class:`Identity`, or raises
    :class:`UnauthorizedError` with a message that says what is missing."""

    def __init__(self, config: AuthConfig, tenants: TenantResolver | None = None):
        if config.mode == "iam" and tenants is None:
            raise ValueError("iam auth needs the principal -> tenant mapping store")
        self.config = config
        self.tenants = tenants

    def authenticate(self, event: Mapping[str, Any]) -> Identity:
        if self.config.mode == "token":
            return self._from_token(event)
        authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
        if self.config.mode == "iam":
            return self._from_iam(authorizer.get("iam") or {})
        return self._from_jwt(authorizer.get("jwt") or {})

    def _from_token(self, event: Mapping[str, Any]) -> Identity:
        headers = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}
        value = headers.get("authorization")
        if not isinstance(value, str) or not value.strip():
            raise UnauthorizedError("send 'Authorization: Bearer <token>'")
        scheme, _, token = value.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
        tenant = None
        presented = token.encode()
        for known, known_tenant in self.config.tokens.items():
            # Check every token (no early exit) so the time taken says nothing about which matched.
            if hmac.compare_digest(presented, known.encode()):
                tenant = known_tenant
        if tenant is None:
            raise UnauthorizedError("the bearer token is not valid")
        principal = f"token:{tenant}"
        return Identity(principal, tenant, principal in self.config.admin_principals)

    def _from_iam(self, iam: Mapping[str, Any]) -> Identity:
        candidates = principal_candidates(iam)
        if not candidates:
            raise UnauthorizedError("sign the request with AWS SigV4 (IAM authorization)")
        is_admin = any(c in self.config.admin_principals for c in candidates)
        assert self.tenants is not None
        tenant = self.tenants.resolve(candidates)
        return Identity(candidates[0], tenant, is_admin)

    def _from_jwt(self, jwt: Mapping[str, Any]) -> Identity:
        claims = jwt.get("claims") or {}
        if not isinstance(claims, Mapping) or not claims:
            raise UnauthorizedError("send a JWT in the Authorization header")
        subject = claims.get("sub")
        principal = f"jwt:{subject}" if isinstance(subject, str) and subject else "jwt:?"
        tenant = claims.get(self.config.jwt_tenant_claim)
        if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
            tenant = None
        return Identity(principal, tenant, principal in self.config.admin_principals)
