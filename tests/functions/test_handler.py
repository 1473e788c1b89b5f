"""functions/api.py: the Lambda entry point, built from the environment like in a deployment (on moto: it
builds its own boto3 clients). The HTTP API behind it is tested in tests/api, on the in-memory fakes."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

import functions.api as api
from jobsched.api.auth import ENV_ADMIN_PRINCIPALS
from jobsched.runtime.resources import ENV_AUTH_MODE, ENV_TENANT_TOKENS
from tests.api.conftest import JOB
from tests.api.events import ACME, TOKENS, body_of, http_event
from tests.aws.conftest import aws, aws_environ  # noqa: F401 - the moto fixtures, exported as the environment


@dataclass
class LambdaContext:
    function_name: str = "jobsched-api"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:jobsched-api"
    aws_request_id: str = "req-1"


@pytest.fixture
def handler(aws_environ, monkeypatch):  # noqa: F811
    monkeypatch.setenv(ENV_AUTH_MODE, "token")
    monkeypatch.setenv(ENV_TENANT_TOKENS, json.dumps(TOKENS))
    monkeypatch.setenv(ENV_ADMIN_PRINCIPALS, "token:ops")
    with api.seam.installed():  # the app is built afresh from this environment
        yield api.handler


def test_handler_builds_the_app_once_and_serves_requests(handler):
    builds = []

    def counted(parts):
        builds.append(1)
        return api.build(parts)

    with api.seam.installed(build=counted):
        created = handler(http_event("POST", "/jobs", body=JOB, headers=ACME), LambdaContext())
        assert created["statusCode"] == 201
        job = body_of(created)
        read = handler(http_event("GET", f"/jobs/{job['id']}", headers=ACME), LambdaContext())
    assert body_of(read)["id"] == job["id"]
    assert len(builds) == 1


def test_handler_answers_health_without_credentials(handler):
    response = handler(http_event("GET", "/health"), LambdaContext())
    assert response["statusCode"] == 200
    assert body_of(response)["status"] == "ok"


def test_missing_configuration_fails_at_build_naming_the_variable(aws_environ, monkeypatch):  # noqa: F811
    monkeypatch.setenv(ENV_AUTH_MODE, "token")
    monkeypatch.delenv(ENV_TENANT_TOKENS, raising=False)
    with api.seam.installed(), pytest.raises(ValueError, match=ENV_TENANT_TOKENS):
        api.handler(http_event("GET", "/health"), LambdaContext())


def test_handler_serves_the_handler_routes_on_dynamodb(handler):
    """Given the deployed function's own clients (moto), When a tenant and an administrator list the
    handlers, and the administrator drains a version and records a forced deploy-check, Then each
    answers as on the fakes (the calls are recorded for the permissions-by-use check)."""
    from jobsched.targets.registry import job, unregister

    job("test.fn.report")(lambda payload, ctx: payload)
    job("test.fn.report", version=2)(lambda payload, ctx: payload)
    root = {"authorization": "Bearer tok-root"}
    try:
        created = handler(
            http_event(
                "POST",
                "/jobs",
                body={**JOB, "target": {"handler": "test.fn.report", "version": 1}},
                headers=ACME,
            ),
            LambdaContext(),
        )
        assert created["statusCode"] == 201, created["body"]
        mine = body_of(handler(http_event("GET", "/handlers", headers=ACME), LambdaContext()))
        drained = handler(
            http_event("POST", "/handlers/test.fn.report/versions/1/drain", headers=root), LambdaContext()
        )
        everyone = body_of(
            handler(http_event("GET", "/handlers", headers=root, query={"scope": "all"}), LambdaContext())
        )
        check = {"forced": True, "code_version": "abc", "problems": []}
        recorded = handler(
            http_event("POST", "/handlers/deploy-checks", body=check, headers=root), LambdaContext()
        )
        listed = body_of(handler(http_event("GET", "/handlers/deploy-checks", headers=root), LambdaContext()))
    finally:
        unregister("test.fn.report")
    versions = {(v["name"], v["version"]): v for v in everyone["handlers"]}
    assert [v["jobs"] for v in mine["handlers"] if v["name"] == "test.fn.report"] == [1, 0]
    assert body_of(drained)["status"] == "draining"
    assert versions[("test.fn.report", 1)]["status"] == "draining"
    assert recorded["statusCode"] == 201 and [c["code_version"] for c in listed["items"]] == ["abc"]


def test_handler_serves_the_forecast_on_dynamodb(handler):
    """Given the deployed function's own clients (moto) and a tenant's job every 10 minutes, When the
    tenant and an administrator read GET /forecast, Then both see its runs of the coming hour (the
    due index, the ledger and the jobs read by the api function: recorded for the permissions check)."""
    created = handler(
        http_event("POST", "/jobs", body={**JOB, "schedule": "*/10 * * * *"}, headers=ACME), LambdaContext()
    )
    assert created["statusCode"] == 201, created["body"]
    own = body_of(handler(http_event("GET", "/forecast", headers=ACME), LambdaContext()))
    every = body_of(
        handler(http_event("GET", "/forecast", headers={"authorization": "Bearer tok-root"}), LambdaContext())
    )
    assert own["tenant"] == "acme" and own["total"] in (5, 6)  # 6 unless this minute's run is past
    assert every["tenant"] is None and every["total"] == own["total"]


def test_each_request_adds_its_cost_to_the_callers_usage(handler, aws_environ):  # noqa: F811
    """Given the api function (decision 0059),
    When acme creates a job and then reads it,
    Then acme's usage item of the day holds both invocations (2 Lambda requests, their duration) and
    the DynamoDB units of the requests made for it, each invocation's write included; no other
    tenant has an item."""
    from datetime import UTC, datetime

    from jobsched.aws.metering import dynamo_for
    from jobsched.aws.usage_store import UsageStore
    from jobsched.core.clock import FakeClock

    at = datetime(2026, 3, 2, 23, 59, 59, tzinfo=UTC)
    with api.seam.installed(clock=FakeClock(at)):  # the function's clock dates the item
        created = handler(http_event("POST", "/jobs", body=JOB, headers=ACME), LambdaContext())
        handler(http_event("GET", f"/jobs/{body_of(created)['id']}", headers=ACME), LambdaContext())

    today = at.date()
    settings = aws_environ.settings
    store = UsageStore(dynamo_for(settings, aws_environ.clients.dynamodb), settings.leases_table)
    [day] = store.all_days(today, today)
    assert day.tenant == "acme"
    assert day.lambda_requests == pytest.approx(2.0)
    assert day.lambda_gb_seconds > 0 and day.wru > 2 and day.rru > 0
    assert day.estimated_usd(512) > 0
