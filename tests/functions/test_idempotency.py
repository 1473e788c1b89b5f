"""POST /jobs with Idempotency-Key: a retried create answers the first 201, never a second job."""

from __future__ import annotations

from jobsched.api.idempotency import fingerprint
from jobsched.api.schemas import JobIn
from jobsched.api.wiring import api_idempotency_store
from tests.functions.conftest import JOB
from tests.functions.events import ACME, GLOBEX, body_of


def _create(call, body, headers, key="create-1"):
    return call("POST", "/jobs", body=body, headers={**headers, "Idempotency-Key": key})


def test_same_key_and_body_answers_the_same_201_and_creates_one_job(call):
    first = _create(call, JOB, ACME)
    again = _create(call, dict(reversed(list(JOB.items()))), ACME)  # same body, other key order
    assert first["statusCode"] == again["statusCode"] == 201
    assert body_of(again) == body_of(first)
    assert again["headers"]["Idempotent-Replayed"] == "true"
    assert len(body_of(call("GET", "/jobs", headers=ACME))["items"]) == 1


def test_same_key_with_another_body_is_422(call):
    _create(call, JOB, ACME)
    response = _create(call, {**JOB, "name": "other"}, ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["error"] == "idempotency_key_reused"
    assert len(body_of(call("GET", "/jobs", headers=ACME))["items"]) == 1


def test_keys_are_per_tenant(call):
    mine = body_of(_create(call, JOB, ACME))
    theirs = body_of(_create(call, JOB, GLOBEX))
    assert mine["id"] != theirs["id"]


def test_a_rejected_create_releases_its_key(call):
    # Given a create with a key that fails validation in the job service (unknown handler)
    bad = {**JOB, "target": {"handler": "no.such"}}
    assert _create(call, bad, ACME)["statusCode"] == 422
    # When the same key is used with a corrected body
    response = _create(call, JOB, ACME)
    # Then the create goes through: the failed attempt left no record behind
    assert response["statusCode"] == 201


def test_key_in_progress_is_409(call, aws, clock):
    # Given a request that claimed the key and has not finished (its lock still holds)
    store = api_idempotency_store(aws.clients.dynamodb, aws.settings.leases_table)
    store.begin("acme", "create-1", fingerprint(JobIn(**JOB).model_dump(mode="json")), clock.now())
    # When the same request arrives again
    response = _create(call, JOB, ACME)
    # Then 409: retry shortly
    assert response["statusCode"] == 409
    assert "in progress" in body_of(response)["message"]


def test_malformed_key_is_400(call):
    response = _create(call, JOB, ACME, key="has space")
    assert response["statusCode"] == 400


def test_a_claim_whose_lock_lapsed_is_taken_over_by_the_same_request(call, aws, clock):
    # Given a request that claimed the key and died (its lock lapses after 60 s)
    store = api_idempotency_store(aws.clients.dynamodb, aws.settings.leases_table)
    store.begin("acme", "create-1", fingerprint(JobIn(**JOB).model_dump(mode="json")), clock.now())
    clock.advance(61)
    # When the client retries with the same body
    response = _create(call, JOB, ACME)
    # Then this request creates the job
    assert response["statusCode"] == 201
    assert len(body_of(call("GET", "/jobs", headers=ACME))["items"]) == 1
