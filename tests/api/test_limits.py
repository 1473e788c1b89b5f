"""Limits with clear errors: jobs per tenant (409), and nothing written when a limit refuses."""

from __future__ import annotations

import pytest

from tests.api.conftest import JOB
from tests.api.events import ACME, GLOBEX, body_of, http_event


@pytest.fixture
def small(make_app):
    """An API whose tenants may have two jobs each."""
    app = make_app(max_jobs=2)
    return lambda method, path, **kw: app.resolve(http_event(method, path, **kw), None)


def test_third_job_over_a_limit_of_two_is_409_and_not_written(small):
    for i in range(2):
        assert small("POST", "/jobs", body={**JOB, "name": f"j{i}"}, headers=ACME)["statusCode"] == 201
    response = small("POST", "/jobs", body=JOB, headers=ACME)
    assert response["statusCode"] == 409
    assert body_of(response) == {
        "error": "job_limit_reached",
        "message": "this tenant has 2 jobs, the limit; delete jobs it no longer needs",
    }
    assert len(body_of(small("GET", "/jobs", headers=ACME))["items"]) == 2


def test_the_limit_is_per_tenant(small):
    for i in range(2):
        small("POST", "/jobs", body={**JOB, "name": f"j{i}"}, headers=ACME)
    assert small("POST", "/jobs", body=JOB, headers=GLOBEX)["statusCode"] == 201


def test_deleting_a_job_frees_its_slot(small):
    jobs = [body_of(small("POST", "/jobs", body=JOB, headers=ACME)) for _ in range(2)]
    small("DELETE", f"/jobs/{jobs[0]['id']}", headers={**ACME, "If-Match": "1"})
    assert small("POST", "/jobs", body=JOB, headers=ACME)["statusCode"] == 201


def test_a_rejected_create_uses_no_slot(small):
    for _ in range(3):
        bad = small("POST", "/jobs", body={**JOB, "schedule": "nope"}, headers=ACME)
        assert bad["statusCode"] == 422
    for i in range(2):
        assert small("POST", "/jobs", body={**JOB, "name": f"j{i}"}, headers=ACME)["statusCode"] == 201


def test_an_idempotent_replay_uses_no_slot(small):
    headers = {**ACME, "Idempotency-Key": "k"}
    for _ in range(3):
        assert small("POST", "/jobs", body=JOB, headers=headers)["statusCode"] == 201
    assert small("POST", "/jobs", body={**JOB, "name": "second"}, headers=ACME)["statusCode"] == 201
