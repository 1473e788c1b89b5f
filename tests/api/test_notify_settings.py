"""``notify`` on jobs and ``/settings/notify``: validated with clear 4xx, tenant from the identity only."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from jobsched.api.app import build_app
from jobsched.api.auth import AuthConfig, Authenticator
from jobsched.compose.api import build_services
from jobsched.runtime.resources import ENV_AUTH_MODE, ENV_TENANT_TOKENS
from tests.api.conftest import JOB
from tests.api.events import ACME, GLOBEX, TOKENS, http_event

TEAM_TOPIC = "arn:aws:sns:us-east-1:123456789012:team-payments"


@pytest.fixture
def call(aws, clock):
    """The API of a deployment that allows topics ``team-*`` of account 123456789012."""
    settings = replace(aws.settings, notify_topic_arns=("arn:aws:sns:us-east-1:123456789012:team-*",))
    services = build_services(settings, aws.clients, clock)
    env = {ENV_AUTH_MODE: "token", ENV_TENANT_TOKENS: json.dumps(TOKENS)}
    app = build_app(services, Authenticator(AuthConfig.from_env(env), services.principals))

    def do(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return app.resolve(http_event(method, path, **kwargs), None)

    return do


def _body(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])


def test_a_job_keeps_the_notify_it_was_created_with(call):
    # Given a job naming an allowed topic and a public webhook
    notify = {"sns_topic_arn": TEAM_TOPIC, "webhook": "https://hooks.example.com/jobsched"}
    # When it is created and read back
    created = call("POST", "/jobs", body={**JOB, "notify": notify}, headers=ACME)
    assert created["statusCode"] == 201, created["body"]
    read = _body(call("GET", f"/jobs/{_body(created)['id']}", headers=ACME))
    # Then the job shows its notify
    assert read["notify"] == notify


def test_a_job_without_notify_shows_an_empty_object(call):
    # Given a job created without notify / Then its notify is {} (the tenant's default applies)
    created = call("POST", "/jobs", body=JOB, headers=ACME)
    assert _body(created)["notify"] == {}


@pytest.mark.parametrize(
    ("notify", "status", "needle"),
    [
        ({"sns_topic_arn": "arn:aws:sqs:us-east-1:123456789012:q"}, 422, "not an SNS topic ARN"),
        ({"sns_topic_arn": "arn:aws:sns:us-east-1:123456789012:other"}, 422, "notify_topic_arns"),
        ({"webhook": "ftp://hooks.example.com/x"}, 422, "http:// or https://"),
        ({"webhook": "https://user:pw@hooks.example.com/x"}, 422, "credentials"),
        ({"webhook": "http://169.254.169.254/latest"}, 422, "metadata"),
        ({"webhook": "http://127.0.0.1:9000/hook"}, 422, "loopback"),
        ({"webhook": "http://localhost/hook"}, 422, "loopback"),
        ({"webhook": "https://10.1.2.3/hook"}, 422, "private"),
        ({"email": "ops@example.com"}, 422, "email"),
    ],
)
def test_a_bad_notify_is_refused_with_a_clear_4xx_and_nothing_is_written(call, notify, status, needle):
    # Given a job whose notify is wrong in one way
    # When it is created
    response = call("POST", "/jobs", body={**JOB, "notify": notify}, headers=ACME)
    # Then a 4xx names the problem, and no job was stored
    assert response["statusCode"] == status, response["body"]
    assert needle in _body(response)["message"]
    assert _body(call("GET", "/jobs", headers=ACME))["items"] == []


def test_a_patch_replaces_the_notify_and_an_empty_object_removes_it(call):
    # Given a job with a webhook
    job = _body(
        call("POST", "/jobs", body={**JOB, "notify": {"webhook": "https://a.example.com"}}, headers=ACME)
    )
    # When its notify is patched to a topic, then to {}
    patched = call(
        "PATCH",
        f"/jobs/{job['id']}",
        body={"notify": {"sns_topic_arn": TEAM_TOPIC}},
        headers={**ACME, "if-match": str(job["version"])},
    )
    assert patched["statusCode"] == 200, patched["body"]
    assert _body(patched)["notify"] == {"sns_topic_arn": TEAM_TOPIC}
    cleared = call(
        "PATCH",
        f"/jobs/{job['id']}",
        body={"notify": {}},
        headers={**ACME, "if-match": str(job["version"] + 1)},
    )
    # Then the notify follows each patch
    assert _body(cleared)["notify"] == {}


def test_a_patch_with_a_bad_notify_is_refused_and_the_job_is_unchanged(call):
    job = _body(call("POST", "/jobs", body=JOB, headers=ACME))
    response = call(
        "PATCH",
        f"/jobs/{job['id']}",
        body={"notify": {"webhook": "http://[::1]/x"}},
        headers={**ACME, "if-match": str(job["version"])},
    )
    assert response["statusCode"] == 422 and "loopback" in _body(response)["message"]
    assert _body(call("GET", f"/jobs/{job['id']}", headers=ACME))["version"] == job["version"]


def test_the_tenant_default_is_set_read_and_cleared_for_the_calling_tenant_only(call):
    # Given acme sets a default
    notify = {"sns_topic_arn": TEAM_TOPIC}
    put = call("PUT", "/settings/notify", body=notify, headers=ACME)
    assert put["statusCode"] == 200, put["body"]
    # Then acme reads it, globex has none (the tenant comes from the identity)
    assert _body(call("GET", "/settings/notify", headers=ACME)) == {"notify": notify}
    assert _body(call("GET", "/settings/notify", headers=GLOBEX)) == {"notify": {}}
    # When acme puts {} / Then the default is gone
    assert _body(call("PUT", "/settings/notify", body={}, headers=ACME)) == {"notify": {}}
    assert _body(call("GET", "/settings/notify", headers=ACME)) == {"notify": {}}


def test_a_bad_tenant_default_is_refused_with_a_4xx_and_the_old_one_kept(call):
    call("PUT", "/settings/notify", body={"webhook": "https://a.example.com"}, headers=ACME)
    for body in ({"sns_topic_arn": "arn:aws:sns:eu-west-1:999999999999:x"}, {"tenant": "globex"}, [1]):
        response = call("PUT", "/settings/notify", body=body, headers=ACME)
        assert 400 <= response["statusCode"] < 500, response["body"]
    assert _body(call("GET", "/settings/notify", headers=ACME)) == {
        "notify": {"webhook": "https://a.example.com"}
    }


def test_the_settings_routes_need_an_authenticated_caller(call):
    assert call("GET", "/settings/notify")["statusCode"] == 401
    assert call("PUT", "/settings/notify", body={})["statusCode"] == 401
