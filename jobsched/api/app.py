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
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.models import OpenAPI, Server

from jobsched import __version__
from jobsched.api import gate
from jobsched.api.auth import Authenticator
from jobsched.api.contract import DeploymentFacts, tighten
from jobsched.api.deps import IDENTITY_CONTEXT_KEY
from jobsched.api.errors import raw_error_response, register_error_handlers
from jobsched.api.openapi import polish
from jobsched.api.routes.health import health_router
from jobsched.api.run_logs import RunLogs
from jobsched.api.tenants import admin_router
from jobsched.console import ConsoleConfig
from jobsched.core.clock import Clock
from jobsched.core.errors import JobschedError
from jobsched.ports.api import IdempotencyRecords, JobCounts, Principals
from jobsched.runtime import observability as obs

if TYPE_CHECKING:
    from jobsched.aws.tenant_limits import TenantLimits
    from jobsched.aws.usage_store import UsageStore
    from jobsched.services.backfills import BackfillService
    from jobsched.services.dead_letters import DeadLetterService
    from jobsched.services.jobs import JobService
    from jobsched.services.notifications import TenantNotifySettings
    from jobsched.services.runs import RunService
    from jobsched.services.workflow_service import WorkflowService

TITLE = "jobsched"
#: Where ``GET /`` sends a browser (the operator console is at ``/ui``).
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
    principals: Principals | None = None
    idempotency: IdempotencyRecords | None = None
    quota: JobCounts | None = None
    jobs: JobService | None = None
    runs: RunService | None = None
    dead_letters: DeadLetterService | None = None
    notify_settings: TenantNotifySettings | None = None
    run_logs: RunLogs = field(default_factory=RunLogs)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    tenant_limits: TenantLimits | None = None
    usage: UsageStore | None = None
    worker_memory_mb: int = 1024
    workflows: WorkflowService | None = None
    backfills: BackfillService | None = None  # backfills over the synchronous size answer 202 with it


class JobschedResolver(APIGatewayHttpResolver):
    """An ``APIGatewayHttpResolver`` that authenticates and checks the body before routing."""

    #: One resolver serves one request at a time, as a Lambda container does (Powertools keeps the
    #: routing context on the resolver); concurrent requests in one process (the embedded mode's
    #: threaded HTTP bridge) each take a resolver of their own from :class:`ResolverPool`. This lock
    #: only guards a resolver used directly by two threads at once: it makes them take turns.
    def __init__(self, authenticator: Authenticator, facts: Callable[[], DeploymentFacts] | None = None):
        super().__init__(
            enable_validation=True,
            json_body_deserializer=gate.parse_json,
            serializer=partial(json.dumps, separators=(",", ":"), default=str),
        )
        self.authenticator = authenticator
        self._serving = threading.Lock()
        self.facts = facts or DeploymentFacts
        #: Builds another resolver of the same services (set by :func:`build_app`).
        self.sibling: Callable[[], JobschedResolver] = lambda: self

    # Powertools assigns the request's event and context to the ``BaseRouter`` *class*, shared by
    # every resolver of the process; these properties keep them on this resolver instead, so two
    # resolvers serving at once each see their own request (the routers included here ask this
    # resolver, ``Router.api_resolver``).
    @property
    def current_event(self) -> Any:
        return self.__dict__["_request_event"]

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self.__dict__["_request_event"] = value

    @property
    def lambda_context(self) -> Any:
        return self.__dict__.get("_request_context")

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self.__dict__["_request_context"] = value

    def _to_proxy_event(self, event: dict) -> Any:
        proxy = super()._to_proxy_event(event)
        self.current_event = proxy  # what resolve() puts on the class, kept on this resolver
        return proxy

    def _convert_matches_into_route_keys(self, match: Any) -> dict[str, str]:
        """Path parameters percent-decoded: the route matches the raw path (API Gateway's ``rawPath``
        keeps a client's encoding), so a tenant ``a@b`` sent as ``a%40b`` was refused by its pattern."""
        keys = super()._convert_matches_into_route_keys(match)
        return {name: unquote(value) for name, value in keys.items()}

    def get_openapi_schema(self, **kwargs: Any) -> OpenAPI:
        """Powertools' document with this API's error bodies (used by /openapi.json and /docs)."""
        generated = super().get_openapi_schema(**kwargs)
        document = generated.model_dump(mode="json", by_alias=True, exclude_none=True)
        return OpenAPI.model_validate(tighten(polish(document), self.facts()))

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        with self._serving:
            self.lambda_context = context
            try:
                identity = gate.admit(event, self.authenticator)
            except JobschedError as error:
                return raw_error_response(error)
            if identity is not None:
                self.append_context(**{IDENTITY_CONTEXT_KEY: identity})
            with obs.request_lane(identity.tenant if identity is not None else None):
                return super().resolve(event, context)


class ResolverPool:
    """Resolvers for concurrent requests in one process, like Lambda's containers for concurrent
    invocations: a request takes an idle resolver (built with ``build`` when none is idle) and gives it
    back when answered, so a slow request never holds up another. On AWS a container never overlaps
    invocations and the pool holds one resolver; the embedded mode's HTTP bridge serves requests on
    threads and gets one resolver per request in flight (at most ``size``; more wait for one)."""

    def __init__(self, first: JobschedResolver, size: int = 16):
        self._build = first.sibling
        self._idle: list[JobschedResolver] = [first]
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self.built = 0

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        with self._slots:
            with self._lock:
                app = self._idle.pop() if self._idle else None
            if app is None:
                app = self._build()
                with self._lock:
                    self.built += 1
            try:
                return app.resolve(event, context)
            finally:
                with self._lock:
                    self._idle.append(app)


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
    app.sibling = partial(build_app, services, authenticator)
    register_error_handlers(app)
    app.include_router(health_router(services.clock))
    if services.principals is not None:
        app.include_router(admin_router(services.principals, services.clock))
    _include_optional_routers(app, services)
    from jobsched.api.routes.console import console_router

    app.include_router(console_router(services.console, authenticator.config.mode))

    openapi = _openapi_kwargs(authenticator.config.mode)
    # Swagger UI with its JavaScript and CSS inlined by Powertools (no CDN needed, works offline).
    app.enable_swagger(path="/docs", compress=True, **openapi)
    cached: dict[str, str] = {}

    @app.get("/", include_in_schema=False)
    def root():
        """A browser opening the API's root is sent to the Swagger UI (the console is at /ui)."""
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

        app.include_router(
            jobs_router(
                services.jobs,
                services.clock,
                services.idempotency,
                services.quota,
                backfills=services.backfills,
            )
        )
    if services.runs is not None:
        from jobsched.api.routes.runs import runs_router

        app.include_router(runs_router(services.runs, services.clock, services.run_logs))
    if services.workflows is not None:
        from jobsched.api.routes.workflows import workflows_router

        app.include_router(workflows_router(services.workflows, services.clock, services.quota))
    if services.dead_letters is not None:
        from jobsched.api.routes.dead_letters import dead_letters_router

        app.include_router(dead_letters_router(services.dead_letters, services.clock))
    if services.notify_settings is not None:
        from jobsched.api.routes.settings import settings_router

        app.include_router(settings_router(services.notify_settings, services.clock))
    if services.tenant_limits is not None:
        from jobsched.api.routes.limits import limits_router

        app.include_router(limits_router(services.tenant_limits, services.clock))
    if services.usage is not None:
        from jobsched.api.routes.limits import usage_router

        app.include_router(usage_router(services.usage, services.clock, services.worker_memory_mb))
