"""Deadlines over HTTP (docs/semantics/runs.md, decision 0058): jobs and workflows take and show
``deadline_seconds`` (0 = none; PATCH 0 removes it); a bad one is a 422 naming the field and writes
nothing; a run shows ``deadline_at`` and ``deadline_missed_at``."""

from __future__ import annotations

import pytest

from tests.api.conftest import JOB
from tests.api.events import ACME, body_of


def test_a_job_takes_shows_and_removes_its_deadline(call):
    job = body_of(call("POST", "/jobs", body={**JOB, "deadline_seconds": 600}, headers=ACME))
    assert job["deadline_seconds"] == 600
    assert body_of(call("GET", f"/jobs/{job['id']}", headers=ACME))["deadline_seconds"] == 600
    patched = call(
        "PATCH", f"/jobs/{job['id']}", body={"deadline_seconds": 0}, headers={**ACME, "If-Match": "1"}
    )
    assert patched["statusCode"] == 200 and body_of(patched)["deadline_seconds"] == 0


def test_a_job_without_a_deadline_shows_zero(call):
    assert body_of(call("POST", "/jobs", body=JOB, headers=ACME))["deadline_seconds"] == 0


@pytest.mark.parametrize("value", [-1, 7 * 86400 + 1, "600", 1.5, True])
def test_a_bad_deadline_is_422_naming_the_field_and_writes_nothing(call, value):
    response = call("POST", "/jobs", body={**JOB, "deadline_seconds": value}, headers=ACME)
    assert response["statusCode"] == 422
    assert "deadline_seconds" in body_of(response)["message"]
    assert body_of(call("GET", "/jobs", headers=ACME))["items"] == []


def test_a_workflow_takes_and_shows_its_deadline(call):
    workflow = {
        "name": "etl",
        "schedule": "0 3 * * *",
        "deadline_seconds": 3600,
        "nodes": [{"id": "a", "target": {"handler": "demo.echo"}}],
    }
    created = call("POST", "/workflows", body=workflow, headers=ACME)
    assert created["statusCode"] == 201, body_of(created)
    assert body_of(created)["deadline_seconds"] == 3600


def test_a_manual_run_shows_no_deadline(call):
    job = body_of(call("POST", "/jobs", body={**JOB, "deadline_seconds": 600}, headers=ACME))
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", body={}, headers=ACME))
    shown = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    assert shown["deadline_at"] is None and shown["deadline_missed_at"] is None
