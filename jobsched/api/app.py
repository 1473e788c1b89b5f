"""The resolver: routes split by resource, errors mapped in one place, the gate in front.

``build_app(services, authenticator)`` returns a :class:`JobschedResolver` ready to
``resolve(event, context)`` API Gateway HTTP API (payload v2) events. The routes are module-level
functions on each ``jobsched.api.routes`` module's ``Router``; the services reach them through
Powertools' ``Depends`` (:mod:`jobsched.api.deps`), from the request context the resolver fills. So
the Lambda entry point, the local mode and the tests build the same app with different clients.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.models import OpenAPI, Server

from jobsched import __version__
from jobsched.api import gate
from jobsched.api.auth import Authenticator
from jobsched.api.contract import DeploymentFacts, tighten
from jobsched.api.deps import (
    AUTHENTICATOR_CONTEXT_KEY,
    IDENTITY_CONTEXT_KEY,
    SERVICES_CONTEXT_KEY,
    ApiServices,
)
from jobsched.api.errors import raw_error_response, register_error_handlers
from jobsched.api.openapi import polish, with_payload_schemas
from jobsched.api.routes import (
    admin,
    budgets,
    console,
    dead_letters,
    declared,
    forecast,
    handlers,
    health,
    jobs,
    limits,
    runs,
    schedules,
    settings,
    stats,
    workflows,
)
from jobsched.core.errors import JobschedError
from jobsched.runtime import observability as obs

__all__ = ["ApiServices", "JobschedResolver", "ResolverPool", "build_app"]

TITLE = "jobsched"
#: Where ``GET /`` sends a browser (the operator console is at ``/ui``).
ROOT_REDIRECT = "/docs"
DESCRIPTION = (
    "Multi-tenant job scheduler. JSON in and out; instants are ISO 8601 UTC ending in Z; lists are "
    '{"items": [...], "next_cursor": ...}, newest first. Errors are {"error": "<code>", "message": "..."}. '
    "See docs/api.md."
)


class JobschedResolver(APIGatewayHttpResolver):
    """An ``APIGatewayHttpResolver`` that authenticates and checks the body before routing."""

    #: One resolver serves one request at a time, as a Lambda container does (Powertools keeps the
    #: routing context on the resolver); concurrent requests in one process (the embedded mode's
    #: threaded HTTP bridge) each take a resolver of their own from :class:`ResolverPool`. This lock
    #: only guards a resolver used directly by two threads at once: it makes them take turns.
    def __init__(
        self,
        authenticator: Authenticator,
        facts: Callable[[], DeploymentFacts] | None = None,
        services: ApiServices | None = None,
    ):
        super().__init__(
            enable_validation=True,
            json_body_deserializer=gate.parse_json,
            serializer=partial(json.dumps, separators=(",", ":"), default=str),
        )
        self.authenticator = authenticator
        #: What the routes' ``Depends`` providers hand out (:mod:`jobsched.api.deps`), per request.
        self.services = services
        self._serving = threading.Lock()
        self.facts = facts or DeploymentFacts
        #: Builds another resolver of the same services (set by :func:`build_app`).
        self.sibling: Callable[[], JobschedResolver] = lambda: self

    # Powertools assigns the request's event and context to the ``BaseRouter`` *class*, shared by
    # every resolver of the process; these properties keep them on this resolver instead, so two
    # resolvers serving at once each see their own request. (The routes' own routers are shared by
    # every resolver, so no route reads ``router.current_event``: what a route needs is a ``Depends``.)
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
        facts = self.facts()
        return OpenAPI.model_validate(
            with_payload_schemas(tighten(polish(document), facts), facts.handler_versions)
        )

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        with self._serving:
            self.lambda_context = context
            try:
                identity = gate.admit(event, self.authenticator)
            except JobschedError as error:
                return raw_error_response(error)
            # Each request starts from an empty context: ``include_router`` copies a shared router's
            # context, which is the context of the last resolver that included it (another
            # resolver, maybe serving a request right then).
            self.clear_context()
            self.append_context(
                **{SERVICES_CONTEXT_KEY: self.services, AUTHENTICATOR_CONTEXT_KEY: self.authenticator}
            )
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
    app = JobschedResolver(authenticator, partial(_deployment_facts, services), services)
    app.sibling = partial(build_app, services, authenticator)
    register_error_handlers(app)
    app.include_router(health.router)
    if services.principals is not None:
        app.include_router(admin.router)
    _include_optional_routers(app, services)
    app.include_router(console.router)

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
    from jobsched.targets.registry import catalogue, registered_names

    policy = getattr(services.jobs, "notify_policy", None)
    patterns = tuple(getattr(policy, "topic_patterns", ()))
    versions = tuple(entry.describe() for entry in catalogue())
    return DeploymentFacts(
        handlers=tuple(registered_names()), topic_patterns=patterns, handler_versions=versions
    )


def _include_optional_routers(app: JobschedResolver, services: ApiServices) -> None:
    """The routers whose services may be absent (a framework test builds the API without them)."""
    app.include_router(schedules.router)
    if services.jobs is not None:
        app.include_router(declared.router)  # before /jobs/<job_id>: "by-name" is not a job id
        app.include_router(jobs.router)
        if services.backfills is not None:
            app.include_router(jobs.backfill_router)
        app.include_router(jobs.history_router)
    if services.runs is not None:
        app.include_router(runs.router)
    if services.workflows is not None:
        app.include_router(workflows.router)
    if services.dead_letters is not None:
        app.include_router(dead_letters.router)
    if services.notify_settings is not None:
        app.include_router(settings.router)
    if services.tenant_limits is not None:
        app.include_router(limits.router)
    if services.usage is not None:
        app.include_router(limits.usage_router)
    if services.handlers is not None:
        app.include_router(handlers.router)
    if services.forecast is not None:
        app.include_router(forecast.router)
    if services.run_stats is not None:
        app.include_router(stats.router)
    if services.budgets is not None:
        app.include_router(budgets.router)
