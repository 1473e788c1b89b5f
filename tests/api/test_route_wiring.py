"""How the routes get their services: module-level routers shared by every resolver, each service
injected with Powertools' ``Depends`` from the resolver's own request context; a job definition is
validated once on its way in (issue 28 §6)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from jobsched.api import deps
from jobsched.api.app import ResolverPool
from jobsched.core import job_specs
from jobsched.core.clock import FakeClock
from tests.api.conftest import JOB
from tests.api.events import ACME, GLOBEX, body_of, hold_a_job_listing, http_event
from tests.api.test_workflows_api import WORKFLOW


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the definitions ``validate_spec`` checks, wherever it is called from."""
    seen: list[str] = []
    real = job_specs.validate_spec

    def counting(spec, catalog=None, **kwargs):
        seen.append(spec.name)
        return real(spec, catalog, **kwargs)

    monkeypatch.setattr(job_specs, "validate_spec", counting)
    import jobsched.services.jobs as jobs_module

    monkeypatch.setattr(jobs_module, "validate_spec", counting)
    return seen


@pytest.mark.parametrize("headers", [ACME, {**ACME, "Idempotency-Key": "create-once"}])
def test_a_new_job_is_validated_once(call, validations, headers):
    # When a job is created (with and without an Idempotency-Key)
    response = call("POST", "/jobs", body=JOB, headers=headers)
    # Then its definition was checked once: the route's check before the quota is what is stored
    assert response["statusCode"] == 201
    assert validations == [JOB["name"]]


def test_a_new_workflow_is_validated_once(call, validations):
    response = call("POST", "/workflows", body=WORKFLOW, headers=ACME)
    assert response["statusCode"] == 201, response["body"]
    assert validations == [WORKFLOW["name"]]


def test_a_job_that_never_fires_is_refused_before_the_quota_is_touched(make_app, validations):
    # Given a tenant at its limit of one job
    app = make_app(max_jobs=1)
    created = app.resolve(http_event("POST", "/jobs", body=JOB, headers=ACME), None)
    assert created["statusCode"] == 201
    # When another job is created whose schedule has no occurrence after now
    past = {**JOB, "schedule": "at(2020-01-01T00:00:00)"}
    response = app.resolve(http_event("POST", "/jobs", body=past, headers=ACME), None)
    # Then the definition's error answers (not the limit's), from the one validation
    assert response["statusCode"] == 422, response["body"]
    assert "has no occurrence after" in body_of(response)["message"]
    assert validations == [JOB["name"], JOB["name"]]


def test_a_dependency_override_swaps_a_service_for_one_app(app, make_app):
    # Given an app whose clock provider is overridden (Powertools' dependency_overrides)
    later = FakeClock(datetime(2030, 1, 1, tzinfo=UTC))
    app.dependency_overrides[deps.clock] = lambda: later
    # Then its routes see the override, and another app built from the same routers does not
    assert body_of(app.resolve(http_event("GET", "/health"), None))["time"] == "2030-01-01T00:00:00.000Z"
    other = make_app()
    assert body_of(other.resolve(http_event("GET", "/health"), None))["time"] == "2026-03-02T12:00:00.000Z"


def test_a_resolver_built_while_another_serves_answers_its_own_caller(app, monkeypatch):
    # Given a pool whose only resolver is held inside acme's listing of jobs
    pool = ResolverPool(app)
    held, release, answers = hold_a_job_listing(pool, monkeypatch, ACME)
    # When globex creates a job meanwhile (on a resolver built now, from the same shared routers)
    created = pool.resolve(http_event("POST", "/jobs", body=JOB, headers=GLOBEX), None)
    release.set()
    held.join(10)
    # Then the job is globex's: the new resolver saw its own caller, not the held request's
    assert pool.built == 1 and created["statusCode"] == 201
    job_id = body_of(created)["id"]
    assert pool.resolve(http_event("GET", f"/jobs/{job_id}", headers=GLOBEX), None)["statusCode"] == 200
    assert pool.resolve(http_event("GET", f"/jobs/{job_id}", headers=ACME), None)["statusCode"] == 404
    assert body_of(answers["held"])["items"] == []
