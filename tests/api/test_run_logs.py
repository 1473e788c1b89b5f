"""The run view's ``logs`` link and ``GET /runs/{id}/logs`` (embedded mode only), through the API."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from jobsched.api.app import build_app
from jobsched.api.auth import AuthConfig, Authenticator
from jobsched.compose.api import build_services
from jobsched.runtime.resources import ENV_AUTH_MODE, ENV_TENANT_TOKENS
from tests.api.events import ACME, GLOBEX, TOKENS, body_of, http_event

JOB = {"name": "logged", "schedule": "@yearly", "target": {"handler": "demo.echo"}}


@pytest.fixture
def api(aws, clock):
    """``api(**settings)`` -> a call function for an API built with those settings changed."""

    def build(**changes):
        services = build_services(replace(aws.settings, **changes), aws.clients, clock)
        config = AuthConfig.from_env({ENV_AUTH_MODE: "token", ENV_TENANT_TOKENS: json.dumps(TOKENS)})
        app = build_app(services, Authenticator(config, services.principals))
        return lambda method, path, **kw: app.resolve(http_event(method, path, **kw), None)

    return build


def _run(call) -> str:
    job = body_of(call("POST", "/jobs", body=JOB, headers=ACME))
    return body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))["id"]


def test_on_aws_the_run_names_the_workers_log_group_and_an_insights_query(api):
    """Given a deployment whose api function knows the worker's log group,
    When a run is read, Then ``logs`` names the group and a Logs Insights query for the run, and
    no lines route; that route answers 404 saying where the lines are."""
    call = api(run_log_group="/aws/lambda/jobsched-Worker")
    run_id = _run(call)

    logs = body_of(call("GET", f"/runs/{run_id}", headers=ACME))["logs"]

    assert logs["log_group"] == "/aws/lambda/jobsched-Worker" and logs["lines"] is None
    assert logs["insights_query"] == (
        "fields @timestamp, level, message, attempt, @logStream"
        f' | filter run_id = "{run_id}" | sort @timestamp asc | limit 10000'
    )
    answer = call("GET", f"/runs/{run_id}/logs", headers=ACME)
    assert answer["statusCode"] == 404
    assert "/aws/lambda/jobsched-Worker" in body_of(answer)["message"]


def test_in_the_embedded_mode_the_route_serves_the_runs_lines_from_the_log_file(api, tmp_path):
    """Given the embedded mode's log file holding lines of two runs, a non-JSON line and an EMF line,
    When the run's lines are asked for, Then only its JSON lines come back, in file order; another
    tenant asking gets 404."""
    log_file = tmp_path / "jobsched-dev.log"
    call = api(run_log_file=str(log_file))
    run_id = _run(call)
    mine = [
        {
            "level": "INFO",
            "message": "first",
            "run_id": run_id,
            "job_id": "j",
            "attempt": 1,
            "tenant": "acme",
        },
        {
            "level": "INFO",
            "message": "second",
            "run_id": run_id,
            "job_id": "j",
            "attempt": 1,
            "tenant": "acme",
        },
    ]
    other = {"level": "INFO", "message": "not mine", "run_id": run_id + "x"}
    text = [json.dumps(mine[0]), "plain text " + run_id, json.dumps(other), json.dumps(mine[1])]
    log_file.write_text("\n".join(text) + "\n")

    assert body_of(call("GET", f"/runs/{run_id}", headers=ACME))["logs"]["lines"] == f"/runs/{run_id}/logs"
    answer = call("GET", f"/runs/{run_id}/logs", headers=ACME)

    assert answer["statusCode"] == 200
    assert body_of(answer) == {"run_id": run_id, "items": mine, "truncated": False}
    assert call("GET", f"/runs/{run_id}/logs", headers=GLOBEX)["statusCode"] == 404


def test_listings_carry_no_logs_link(api):
    """Given a run, When runs are listed, Then their ``logs`` is null (only GET /runs/{id} has it)."""
    call = api(run_log_group="g")
    _run(call)
    assert all(r["logs"] is None for r in body_of(call("GET", "/runs", headers=ACME))["items"])
