"""The API's limit fields and routes: a job's concurrency and rate_limit, a run's waiting_for, the
per-tenant limits an operator sets (admin) and a tenant reads (GET /limits)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from jobsched.api.app import build_app
from jobsched.api.auth import AuthConfig, Authenticator
from jobsched.aws.attempts import AttemptStore
from jobsched.aws.metering import dynamo_for
from jobsched.compose.api import build_services
from jobsched.runtime.resources import ENV_AUTH_MODE, ENV_TENANT_TOKENS
from tests.api.conftest import JOB
from tests.api.events import ACME, TOKENS, body_of, http_event

OPS = {"authorization": "Bearer tok-root"}


def test_a_job_keeps_its_limits_and_shows_their_keys(create_job, call):
    """Given a job with a concurrency limit (no key) and a shared rate limit, when read back, then
    the concurrency key is the job's id and the rate limit is as given, with a burst of 1."""
    job = create_job(ACME, concurrency={"limit": 2}, rate_limit={"key": "stripe", "per_second": 5})
    assert job["concurrency"] == {"key": job["id"], "limit": 2}
    assert job["rate_limit"] == {"key": "stripe", "per_second": 5.0, "burst": 1}
    again = body_of(call("GET", f"/jobs/{job['id']}", headers=ACME))
    assert again["concurrency"] == job["concurrency"] and again["rate_limit"] == job["rate_limit"]


def test_a_job_without_limits_shows_empty_ones(create_job):
    """Given a job created without limits, then both read as {}."""
    job = create_job(ACME)
    assert (job["concurrency"], job["rate_limit"]) == ({}, {})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("concurrency", {"limit": 0}),
        ("concurrency", {"key": "stripe"}),
        ("concurrency", {"key": "has space", "limit": 1}),
        ("concurrency", {"limit": 2, "scope": "tenant"}),
        ("rate_limit", {"per_second": 0}),
        ("rate_limit", {"key": "stripe", "burst": 3}),
        ("rate_limit", {"per_second": 1, "burst": 0}),
        ("rate_limit", "fast"),
    ],
)
def test_malformed_limits_are_422_and_write_nothing(call, field, value):
    """Given a malformed limit, when a job is created with it, then 422 names the field, no job."""
    response = call("POST", "/jobs", body={**JOB, field: value}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]
    assert field in body_of(response)["message"]
    assert body_of(call("GET", "/jobs", headers=ACME))["items"] == []


def test_a_patch_sets_and_removes_a_limit(create_job, call):
    """Given a job, when patched with a concurrency limit and then with {}, then it has the limit,
    then none."""
    job = create_job(ACME)
    patched = call(
        "PATCH",
        f"/jobs/{job['id']}",
        body={"concurrency": {"key": "db", "limit": 3}},
        headers={**ACME, "If-Match": "1"},
    )
    assert body_of(patched)["concurrency"] == {"key": "db", "limit": 3}
    cleared = call("PATCH", f"/jobs/{job['id']}", body={"concurrency": {}}, headers={**ACME, "If-Match": "2"})
    assert body_of(cleared)["concurrency"] == {}


def test_a_waiting_run_shows_what_it_waits_for(aws, clock, create_job, call):
    """Given a run of a job triggered now and marked waiting for its concurrency key (as a worker
    does), when the run is read, then it is queued, waiting_for names the key, with its wait count."""
    job = create_job(ACME, concurrency={"key": "db", "limit": 1})
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", body={}, headers=ACME))
    attempts = AttemptStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.runs_table)
    until = clock.now() + timedelta(seconds=30)
    assert attempts.mark_waiting(run["id"], 1, "concurrency:db", clock.now(), until) == "waiting"
    seen = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    assert (seen["state"], seen["attempt"], seen["waiting_for"], seen["waits"]) == (
        "queued",
        0,
        "concurrency:db",
        1,
    )
    assert seen["waiting_until"] == "2026-03-02T12:00:30.000Z"


def test_an_operator_sets_a_tenants_limits_and_the_tenant_reads_them(call):
    """Given an administrator, when it sets acme's max_running and rate, then acme's GET /limits
    shows them as its own, the admin list holds acme, and DELETE returns to the defaults."""
    put = call(
        "PUT", "/admin/tenants/acme/limits", body={"max_running": 5, "runs_per_second": 2}, headers=OPS
    )
    assert put["statusCode"] == 200, put["body"]
    own = body_of(call("GET", "/limits", headers=ACME))
    assert own == {
        "tenant": "acme",
        "max_running": 5,
        "runs_per_second": 2.0,
        "burst": 1,
        "source": {"max_running": "tenant", "runs_per_second": "tenant"},
    }
    listed = body_of(call("GET", "/admin/tenants/limits", headers=OPS))
    assert [t["tenant"] for t in listed["items"]] == ["acme"]
    assert listed["defaults"] == {"max_running": None, "runs_per_second": None, "burst": None}
    assert call("DELETE", "/admin/tenants/acme/limits", headers=OPS)["statusCode"] == 204
    assert body_of(call("GET", "/limits", headers=ACME))["max_running"] is None
    assert call("DELETE", "/admin/tenants/acme/limits", headers=OPS)["statusCode"] == 404


def test_a_tenant_may_not_set_limits(call):
    """Given a tenant that is not an administrator, when it sets its own limits, then 403."""
    response = call("PUT", "/admin/tenants/acme/limits", body={"max_running": 500}, headers=ACME)
    assert response["statusCode"] == 403


@pytest.mark.parametrize(
    "body", [{}, {"burst": 3}, {"max_running": 0}, {"max_running": 2, "extra": 1}, {"runs_per_second": -1}]
)
def test_malformed_tenant_limits_are_422(call, body):
    """Given a malformed limits body, when an administrator puts it, then 422."""
    assert call("PUT", "/admin/tenants/acme/limits", body=body, headers=OPS)["statusCode"] == 422


def test_the_deployment_default_shows_as_default(aws, clock):
    """Given a deployment default of 10 concurrent runs per tenant, when a tenant with no limits of its
    own reads GET /limits, then max_running is 10 from the default."""
    settings = replace(aws.settings, tenant_max_running=10)
    services = build_services(settings, aws.clients, clock)
    config = AuthConfig.from_env({ENV_AUTH_MODE: "token", ENV_TENANT_TOKENS: json.dumps(TOKENS)})
    app = build_app(services, Authenticator(config, services.principals))
    body = body_of(app.resolve(http_event("GET", "/limits", headers=ACME), None))
    assert body["max_running"] == 10 and body["source"]["max_running"] == "default"


def _add_usage(aws, tenant: str, day: str, **counters) -> None:
    from jobsched.aws.usage_store import UsageStore
    from jobsched.core.usage import DayUsage

    store = UsageStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.leases_table)
    store.add(DayUsage(tenant=tenant, day=day, **counters))


def test_a_tenant_sees_its_own_usage_and_an_operator_every_tenants(aws, call):
    """Given usage of acme and globex today, when acme asks GET /usage, then it gets its own day only;
    an administrator gets both; acme asking for globex is 403."""
    _add_usage(aws, "acme", "2026-03-02", runs_started=3, runs_succeeded=3, run_seconds=1.5, wru=6)
    _add_usage(aws, "globex", "2026-03-02", runs_started=1)
    own = body_of(call("GET", "/usage", headers=ACME))
    assert (own["first_day"], own["last_day"]) == ("2026-02-24", "2026-03-02")
    assert [(d["tenant"], d["runs_started"], d["run_seconds"]) for d in own["items"]] == [("acme", 3, 1.5)]
    assert own["items"][0]["estimated_usd"] > 0
    every = body_of(call("GET", "/usage", headers=OPS))
    assert [d["tenant"] for d in every["items"]] == ["acme", "globex"]
    assert call("GET", "/usage", query={"tenant": "globex"}, headers=ACME)["statusCode"] == 403


def test_the_new_counters_are_answered_and_priced_and_the_deployment_row_is_an_operators_only(aws, call):
    """Given acme's chunked run's transitions, a publish and container time, and the deployment row,
    When acme asks GET /usage, Then its day answers each counter and prices them into estimated_usd;
    the deployment row is not acme's; an administrator gets it beside the tenants."""
    _add_usage(
        aws,
        "acme",
        "2026-03-02",
        sfn_transitions=1000,
        sns_publishes=2,
        fargate_vcpu_seconds=3600,
        fargate_gb_seconds=7200,
    )
    _add_usage(aws, "@deployment", "2026-03-02", sqs_requests=194_400, lambda_requests=1440)
    [day] = body_of(call("GET", "/usage", headers=ACME))["items"]
    assert (day["sfn_transitions"], day["sns_publishes"]) == (1000, 2)
    assert (day["fargate_vcpu_seconds"], day["fargate_gb_seconds"]) == (3600, 7200)
    assert day["estimated_usd"] == pytest.approx(0.025 + 2 * 0.5e-6 + 0.03238 + 2 * 0.00356)
    every = body_of(call("GET", "/usage", headers=OPS))["items"]
    assert [d["tenant"] for d in every] == ["@deployment", "acme"]
    assert every[0]["sqs_requests"] == 194_400 and every[0]["estimated_usd"] > 0


def test_an_administrator_asks_for_the_deployment_row_alone_and_a_tenant_is_refused_it(aws, call):
    """Given acme's day and the deployment row's, When an administrator asks GET /usage with
    tenant=@deployment, Then only the deployment row answers; acme asking for it gets 403, and a name
    that is neither a tenant's nor the deployment row's is 422."""
    _add_usage(aws, "acme", "2026-03-02", sfn_transitions=10)
    _add_usage(aws, "@deployment", "2026-03-02", sqs_requests=194_400, lambda_requests=1440)
    query = {"tenant": "@deployment", "from": "2026-03-01", "to": "2026-03-02"}
    [row] = body_of(call("GET", "/usage", query=query, headers=OPS))["items"]
    assert (row["tenant"], row["day"], row["sqs_requests"]) == ("@deployment", "2026-03-02", 194_400)
    assert call("GET", "/usage", query=query, headers=ACME)["statusCode"] == 403
    bad = call("GET", "/usage", query={**query, "tenant": "@everyone"}, headers=OPS)
    assert bad["statusCode"] == 422


@pytest.mark.parametrize(
    "query", [{"from": "yesterday"}, {"from": "2026-03-02", "to": "2026-03-01"}, {"from": "2026-01-01"}]
)
def test_bad_usage_days_are_422(call, query):
    """Given a malformed day, a reversed range or more than 31 days, then 422."""
    assert call("GET", "/usage", query=query, headers=ACME)["statusCode"] == 422
