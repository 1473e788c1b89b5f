"""Pools over HTTP (docs/pools.md): the job and run views show ``pool``; a bad pool or a timeout beyond
its pool is a 422 naming the field, never a 500, and writes nothing."""

from __future__ import annotations

import pytest

from tests.api.conftest import JOB
from tests.api.events import ACME, body_of


def test_a_job_without_a_pool_answers_with_the_pool_its_timeout_chose(call):
    short = body_of(call("POST", "/jobs", body=JOB, headers=ACME))
    long = body_of(call("POST", "/jobs", body={**JOB, "timeout_seconds": 2400}, headers=ACME))
    assert (short["pool"], long["pool"]) == ("lambda", "container")
    assert body_of(call("GET", f"/jobs/{long['id']}", headers=ACME))["pool"] == "container"


@pytest.mark.parametrize(
    ("extra", "field", "says"),
    [
        ({"pool": "fargate"}, "pool", "lambda"),
        ({"pool": "lambda", "timeout_seconds": 1800}, "timeout_seconds", "set pool to 'container'"),
        ({"pool": "container", "timeout_seconds": 43201}, "timeout_seconds", "43200"),
    ],
)
def test_a_bad_pool_or_timeout_is_422_naming_the_field_and_writes_nothing(call, extra, field, says):
    response = call("POST", "/jobs", body={**JOB, **extra}, headers=ACME)
    assert response["statusCode"] == 422
    message = body_of(response)["message"]
    assert field in message and says in message
    assert body_of(call("GET", "/jobs", headers=ACME))["items"] == []


def test_a_patch_leaving_a_lambda_job_over_the_limit_is_422_and_with_the_pool_it_is_accepted(call):
    job = body_of(call("POST", "/jobs", body=JOB, headers=ACME))
    refused = call(
        "PATCH", f"/jobs/{job['id']}", body={"timeout_seconds": 3600}, headers={**ACME, "If-Match": "1"}
    )
    assert refused["statusCode"] == 422
    assert "set pool to 'container'" in body_of(refused)["message"]
    moved = call(
        "PATCH",
        f"/jobs/{job['id']}",
        body={"timeout_seconds": 3600, "pool": "container"},
        headers={**ACME, "If-Match": "1"},
    )
    assert moved["statusCode"] == 200
    assert (body_of(moved)["pool"], body_of(moved)["timeout_seconds"]) == ("container", 3600)


def test_a_run_answers_with_its_pool(call):
    job = body_of(call("POST", "/jobs", body={**JOB, "pool": "long"}, headers=ACME))
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", body={}, headers=ACME))
    assert run["pool"] == "long"
    assert body_of(call("GET", f"/runs/{run['id']}", headers=ACME))["pool"] == "long"


def test_the_openapi_document_names_the_pools(call):
    document = body_of(call("GET", "/openapi.json", headers=ACME))
    job_in = document["components"]["schemas"]["JobIn"]["properties"]
    assert "pool" in job_in and "pool" in document["components"]["schemas"]["RunOut"]["properties"]
