"""The resolver: routes split by resource, errors mapped in one place, the gate in front.

``build_app(services, authenticator)`` returns a :class:`JobschedResolver` ready to
``resolve(event, context)`` API Gateway HTTP API (payload v2) events. Services are injected, so the
Lambda entry point, the local mode and the tests build the same app with different clients.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.models import OpenAPI, Server

from jobsched import __version__
from jobsched.api import gate
from jobsched.api.auth import Authenticator
from jobsched.api.contract import DeploymentFacts, tighten
from jobsched.api.deps import IDENTITY_CONTEXT_KEY
from jobsched.api.errors import raw_error_response, register_error_handlers
from jobsched.api.idempotency import IdempotencyStore
from jobsched.api.openapi import polish
from jobsched.api.quotas import JobQuota
from jobsched.api.routes.health import health_router
from jobsched.api.run_logs import RunLogs
from jobsched.api.tenants import PrincipalStore, admin_router
from jobsched.core.clock import Clock
from jobsched.core.errors import JobschedError

if TYPE_CHECKING:
    from jobsched.services.dead_letters import DeadLetterService
    from jobsched.services.jobs import JobService
    from jobsched.services.notifications import TenantNotifySettings
    from jobsched.services.runs import RunService

TITLE = "jobsched"
#: Where ``GET /`` sends a browser (there is no console yet).
ROOT_REDIRECT = "/docs"
DESCRIPTION = (
    "Multi-tenant job scheduler. JSON in and out; instants are ISO 8601 UTC ending in Z; lists are "
    '{"items": [...], "next_cursor": ...}, newest first. Errors are {"error": "<code>", "message": "..."}. '
    "See docs/api.md."
)


@dataclass
class ApiServices:
    """Everything the routes call. ``None`` for a service leaves its routes out (framework tests)."""

    clock: Clock
    principals: PrincipalStore | None = None
    idempotency: IdempotencyStore | None = None
    quota: JobQuota | None = None
    jobs: JobService | None = None
    runs: RunService | None = None
    dead_letters: DeadLetterService | None = None
    notify_settings: TenantNotifySettings | None = None
    run_logs: RunLogs = field(default_factory=RunLogs)


class JobschedResolver(APIGatewayHttpResolver):
    """An ``APIGatewayHttpResolver`` that authenticates and checks the body before routing."""

    #: Powertools keeps the current event on the router *class* and the routing context on the
    #: resolver, so a process serves one request at a time. Lambda never overlaps requests in a
    #: container; the embedded mode's threaded HTTP bridge does, hence this lock (uncontended on AWS).
    _serving = threading.Lock()

    def __init__(self, authenticator: Authenticator, facts: Callable[[], DeploymentFacts] | None = None):
        super().__init__(
            enable_validation=True,
            json_body_deserializer=gate.parse_json,
            serializer=partial(json.dumps, separators=(",", ":"), default=str),
        )
        self.authenticator = authenticator
        self.facts = facts or DeploymentFacts

    def get_openapi_schema(self, **kwargs: Any) -> OpenAPI:
        """Powertools' document with this API's error bodies (used by /openapi.json and /docs)."""
        generated = super().get_openapi_schema(**kwargs)
        document = generated.model_dump(mode="json", by_alias=True, exclude_none=True)
        return OpenAPI.model_validate(tighten(polish(document), self.facts()))

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        with self._serving:
            try:
                identity = gate.admit(event, self.authenticator)
            except JobschedError as error:
                return raw_error_response(error)
            if identity is not None:
                self.append_context(**{IDENTITY_CONTEXT_KEY: identity})
            return super().resolve(event, context)


def _security_schemes(mode: str) -> tuple[dict[str, Any], list[dict[str, list[str]]]]:
    from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn, HTTPBearer

    if mode == "token":
        return {"bearer": HTTPBearer(description="a tenant token (embedded mode)")}, [{"bearer": []}]
    if mode == "jwt":
        return {"jwt": HTTPBearer(bearerFormat="JWT", description="JWT with a tenant claim")}, [{"jwt": []}]
    sigv4 = APIKey.model_validate(
        {
            "name": "Authorization",
            "in": APIKeyIn.header,
            "description": "AWS SigV4 (IAM); the principal is mapped to a tenant by an administrator",
        }
    )
    return {"sigv4": sigv4}, [{"sigv4": []}]


def _openapi_kwargs(mode: str) -> dict[str, Any]:
    schemes, security = _security_schemes(mode)
    return {
        "title": TITLE,
        "version": __version__,
        "openapi_version": "3.1.0",
        "description": DESCRIPTION,
        "servers": [Server(url="/")],
        "security_schemes": schemes,
        "security": security,
    }


def build_app(services: ApiServices, authenticator: Authenticator) -> JobschedResolver:
    """The whole API: every router included, error handlers installed, OpenAPI and Swagger UI served."""
    app = JobschedResolver(authenticator, partial(_deployment_facts, services))
    register_error_handlers(app)
    app.include_router(health_router(services.clock))
    if services.principals is not None:
        app.include_router(admin_router(services.principals, services.clock))
    _include_optional_routers(app, services)

    openapi = _openapi_kwargs(authenticator.config.mode)
    # Swagger UI with its JavaScript and CSS inlined by Powertools (no CDN needed, works offline).
    app.enable_swagger(path="/docs", compress=True, **openapi)
    cached: dict[str, str] = {}

    @app.get("/", include_in_schema=False)
    def root():
        """No console yet: a browser opening the API's root is sent to the Swagger UI."""
        body = json.dumps({"docs": ROOT_REDIRECT, "openapi": "/openapi.json"})
        headers = {"Location": ROOT_REDIRECT}
        return Response(
            status_code=302, content_type=content_types.APPLICATION_JSON, body=body, headers=headers
        )

    @app.get("/openapi.json", include_in_schema=False)
    def openapi_json():
        if "doc" not in cached:
            cached["doc"] = app.get_openapi_json_schema(**openapi)
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=cached["doc"])

    return app


def _deployment_facts(services: ApiServices) -> DeploymentFacts:
    """The registered handlers (read when the document is generated: every handler module is loaded
    by then) and the SNS topic allow-list, which the document states as the API checks them."""
    from jobsched.targets.registry import registered_names

    policy = getattr(services.jobs, "notify_policy", None)
    patterns = tuple(getattr(policy, "topic_patterns", ()))
    return DeploymentFacts(handlers=tuple(registered_names()), topic_patterns=patterns)


def _include_optional_routers(app: JobschedResolver, services: ApiServices) -> None:
    """Routers whose services may be absent; imported here so a missing service costs nothing."""
    from jobsched.api.routes import schedules

    app.include_router(schedules.schedules_router(services.clock))
    if services.jobs is not None:
        from jobsched.api.routes.jobs import jobs_router

        app.include_router(jobs_router(services.jobs, services.clock, services.idempotency, services.quota))
    if services.runs is not None:
        from jobsched.api.routes.runs import runs_router

        app.include_router(runs_router(services.runs, services.clock, services.run_logs))
    if services.dead_letters is not None:
        from jobsched.api.routes.dead_letters import dead_letters_router

        app.include_router(dead_letters_router(services.dead_letters, services.clock))
    if services.notify_settings is not None:
        from jobsched.api.routes.settings import settings_router

        app.include_router(settings_router(services.notify_settings, services.clock))
