"""Fixtures for the HTTP API's tests: the real resolver over the in-memory fakes, a fixed clock.

Each app is built the way ``functions/api.py`` builds it (:func:`jobsched.compose.api.build_services`),
only with the fakes of :mod:`jobsched.testing` (run by the test's :class:`FakeClock`) in place of
boto3's clients, and the auth settings of the test.

A test marked ``units`` (it asserts the read units a listing costs, decision 0035) gets the same fakes
reached as a DynamoDB client (:class:`~jobsched.testing.wire.InMemoryDynamoClient`): the stores then
run on the metering adapter, which estimates the units from the items as over moto
(tests/contract/test_capacity.py). tests/functions holds the Lambda entry point's own tests, on moto.
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
from jobsched.testing.wire import InMemoryDynamoClient
from tests.api.events import TOKENS, http_event
from tests.aws.conftest import T0, AwsEnv
from tests.aws.memory import memory_env

ADMIN_ROLE = "arn:aws:iam::123456789012:role/jobsched-admin"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def aws(request: pytest.FixtureRequest, clock: FakeClock) -> AwsEnv:
    """The deployment's tables, queues and bucket in memory, run by ``clock``; for a test marked
    ``units``, the tables reached as a DynamoDB client, so the metering adapter estimates units."""
    env = memory_env(clock)
    if request.node.get_closest_marker("units"):
        env.clients.dynamodb = InMemoryDynamoClient(env.clients.dynamodb)  # type: ignore[assignment]
    return env


@pytest.fixture
def make_app(aws: AwsEnv, clock: FakeClock) -> Callable[..., JobschedResolver]:
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
def work_queue(aws: AwsEnv, clock: FakeClock) -> Callable[[], list[str]]:
    """Run every message now in the default queue through a real worker once; returns the outcomes."""
    from tests.aws.conftest_worker import Kit, sent_messages

    kit = Kit(aws=aws, clock=clock)

    def work() -> list[str]:
        outcomes = []
        for body, _delay in sent_messages(aws, "default"):
            outcomes.append(kit.worker().handle(Delivery.of(json.dumps(body)), clock.now()).status)
        return outcomes

    return work
