"""Fixtures for the API contract tests: the real resolver over moto tables, a fixed clock.

Each app is built the way ``functions/api.py`` builds it (:func:`jobsched.compose.api.build_services`),
only with moto clients, a :class:`FakeClock` and the auth settings of the test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import jobsched.targets.demo  # noqa: F401 - registers demo.* (the API refuses unknown handlers)
from jobsched.api.app import JobschedResolver, build_app
from jobsched.api.auth import ENV_ADMIN_PRINCIPALS, AuthConfig, Authenticator
from jobsched.compose.api import build_services
from jobsched.core.clock import FakeClock
from jobsched.runtime.resources import ENV_AUTH_MODE, ENV_TENANT_TOKENS
from jobsched.services.deliveries import Delivery
from tests.aws.conftest import T0, AwsEnv, aws  # noqa: F401 - the moto fixture, reused
from tests.functions.events import TOKENS, http_event

ADMIN_ROLE = "arn:aws:iam::123456789012:role/jobsched-admin"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def make_app(aws: AwsEnv, clock: FakeClock) -> Callable[..., JobschedResolver]:  # noqa: F811
    """Build the API for an auth mode (``token`` by default, tenants acme and globex)."""

    def build(
        mode: str = "token", admins: str = "token:ops," + ADMIN_ROLE, max_jobs: int = 10_000, **env: str
    ) -> JobschedResolver:
        environ = {
            ENV_AUTH_MODE: mode,
            ENV_TENANT_TOKENS: json.dumps(TOKENS),
            ENV_ADMIN_PRINCIPALS: admins,
            **env,
        }
        services = build_services(aws.settings, aws.clients, clock, max_jobs=max_jobs)
        return build_app(services, Authenticator(AuthConfig.from_env(environ), services.principals))

    return build


@pytest.fixture
def app(make_app: Callable[..., JobschedResolver]) -> JobschedResolver:
    return make_app()


@pytest.fixture
def call(app: JobschedResolver) -> Callable[..., dict[str, Any]]:
    """``call("GET", "/jobs", headers=ACME)`` -> the API Gateway response dict."""

    def do(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return app.resolve(http_event(method, path, **kwargs), None)

    return do


JOB = {"name": "nightly report", "schedule": "0 3 * * *", "target": {"handler": "demo.echo"}}


@pytest.fixture
def create_job(call: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``create_job(headers=ACME, **overrides)`` -> the created job (asserts the 201)."""

    def create(headers: dict[str, str], **overrides: Any) -> dict[str, Any]:
        response = call("POST", "/jobs", body={**JOB, **overrides}, headers=headers)
        assert response["statusCode"] == 201, response["body"]
        return json.loads(response["body"])

    return create


@pytest.fixture
def work_queue(aws: AwsEnv, clock: FakeClock) -> Callable[[], list[str]]:  # noqa: F811
    """Run every message now in the default queue through a real worker once; returns the outcomes."""
    from tests.aws.conftest_worker import Kit, sent_messages

    kit = Kit(aws=aws, clock=clock)

    def work() -> list[str]:
        outcomes = []
        for body, _delay in sent_messages(aws, "default"):
            outcomes.append(kit.worker().handle(Delivery.of(json.dumps(body)), clock.now()).status)
        return outcomes

    return work
