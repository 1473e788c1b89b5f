"""POST /jobs with Idempotency-Key: a retried create answers with the job it created, never a second
job — also when the first attempt died after writing the job, or its job was deleted since."""

from __future__ import annotations

import pytest

from jobsched.api.idempotency import IdempotencyStore, fingerprint
from jobsched.api.schemas import JobIn
from jobsched.aws.jobs_store import JobsStore
from jobsched.compose.api import api_idempotency_store, build_services, newest_first_job_id
from tests.api.conftest import JOB
from tests.api.events import ACME, GLOBEX, body_of, http_event

DIGEST = fingerprint(JobIn(**JOB).model_dump(mode="json"))


def _create(call, body, headers, key="create-1"):
    return call("POST", "/jobs", body=body, headers={**headers, "Idempotency-Key": key})


def _jobs(call, headers=ACME):
    return body_of(call("GET", "/jobs", headers=headers))["items"]


def _slots_used(aws, tenant="acme") -> int:
    item = aws.clients.dynamodb.get_item(
        TableName=aws.settings.leases_table, Key={"lease_key": {"S": f"jobcount#{tenant}"}}
    ).get("Item")
    return int(item["jobs"]["N"]) if item else 0


def _store(aws) -> IdempotencyStore:
    return api_idempotency_store(aws.clients.dynamodb, aws.settings.leases_table)


@pytest.fixture
def complete_fails_once(monkeypatch):
    """The function dies after the job is written, before the response is stored for the key."""
    real = IdempotencyStore.complete
    calls = []

    def complete(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise RuntimeError("the function stopped")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(IdempotencyStore, "complete", complete)


def test_same_key_and_body_answers_the_same_201_and_creates_one_job(call):
    first = _create(call, JOB, ACME)
    again = _create(call, dict(reversed(list(JOB.items()))), ACME)  # same body, other key order
    assert first["statusCode"] == again["statusCode"] == 201
    assert body_of(again) == body_of(first)
    assert again["headers"]["Idempotent-Replayed"] == "true"
    assert len(_jobs(call)) == 1


def test_same_key_with_another_body_is_422(call):
    _create(call, JOB, ACME)
    response = _create(call, {**JOB, "name": "other"}, ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["error"] == "idempotency_key_reused"
    assert len(_jobs(call)) == 1


def test_keys_are_per_tenant(call):
    mine = body_of(_create(call, JOB, ACME))
    theirs = body_of(_create(call, JOB, GLOBEX))
    assert mine["id"] != theirs["id"]
    assert [j["id"] for j in _jobs(call, GLOBEX)] == [theirs["id"]]


def test_without_a_key_each_create_makes_a_job_with_a_new_id(call):
    first = call("POST", "/jobs", body=JOB, headers=ACME)
    second = call("POST", "/jobs", body=JOB, headers=ACME)
    assert first["statusCode"] == second["statusCode"] == 201
    assert "Idempotent-Replayed" not in second["headers"]
    assert body_of(first)["id"] != body_of(second)["id"]
    assert len(_jobs(call)) == 2


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
    _store(aws).begin("acme", "create-1", DIGEST, clock.now(), job_id=newest_first_job_id(clock.now()))
    # When the same request arrives again
    response = _create(call, JOB, ACME)
    # Then 409: retry shortly
    assert response["statusCode"] == 409
    assert "in progress" in body_of(response)["message"]


def test_malformed_key_is_400(call):
    response = _create(call, JOB, ACME, key="has space")
    assert response["statusCode"] == 400


def test_a_claim_whose_lock_lapsed_is_taken_over_with_the_job_id_it_holds(call, aws, clock):
    # Given a request that claimed the key and died before writing its job (the lock lapses after 60 s)
    claimed = newest_first_job_id(clock.now())
    _store(aws).begin("acme", "create-1", DIGEST, clock.now(), job_id=claimed)
    clock.advance(61)
    # When the client retries with the same body
    response = _create(call, JOB, ACME)
    # Then this request creates the job, under the id the claim holds
    assert response["statusCode"] == 201
    assert body_of(response)["id"] == claimed
    assert [j["id"] for j in _jobs(call)] == [claimed]
    assert _slots_used(aws) == 1


def test_a_create_that_died_after_writing_its_job_is_answered_with_that_job(
    call, aws, clock, complete_fails_once
):
    # Given a create that wrote its job and died before its response was stored for the key
    assert _create(call, JOB, ACME)["statusCode"] == 500
    [written] = _jobs(call)
    # When the client retries with the same key and body once the lock has lapsed
    clock.advance(61)
    retry = _create(call, JOB, ACME)
    # Then it gets that job (201, replayed), and the tenant has one job, counted once
    assert retry["statusCode"] == 201
    assert retry["headers"]["Idempotent-Replayed"] == "true"
    assert retry["headers"]["Location"] == f"/jobs/{written['id']}"
    assert body_of(retry)["id"] == written["id"]
    assert [j["id"] for j in _jobs(call)] == [written["id"]]
    assert _slots_used(aws) == 1
    # And the answer is now stored: a further retry gets it again
    assert body_of(_create(call, JOB, ACME)) == body_of(retry)


def test_a_retry_at_the_job_limit_still_finds_its_job(make_app, aws, clock, complete_fails_once):
    # Given a tenant allowed one job, whose create wrote the job and died before storing its response
    app = make_app(max_jobs=1)

    def call(method, path, **kwargs):
        return app.resolve(http_event(method, path, **kwargs), None)

    assert _create(call, JOB, ACME)["statusCode"] == 500
    # When the create is retried after the lock lapsed
    clock.advance(61)
    retry = _create(call, JOB, ACME)
    # Then the job is found, not refused for the limit its own slot fills
    assert retry["statusCode"] == 201
    assert len(_jobs(call)) == 1 and _slots_used(aws) == 1


def test_a_create_failing_after_an_unknown_write_can_be_retried_at_once(call, aws, monkeypatch):
    # Given a job write that is applied but reported as a failure (a timeout after DynamoDB wrote it)
    real = JobsStore.create
    failures = []

    def create(self, job):
        stored = real(self, job)
        if not failures:
            failures.append(job.id)
            raise ConnectionError("read timeout")
        return stored

    monkeypatch.setattr(JobsStore, "create", create)
    assert _create(call, JOB, ACME)["statusCode"] == 500
    # When the client retries at once (no wait for the lock: the failed attempt lifted it)
    retry = _create(call, JOB, ACME)
    # Then it gets the job that was written, counted once (the failed attempt kept its slot)
    assert retry["statusCode"] == 201
    assert body_of(retry)["id"] == failures[0]
    assert [j["id"] for j in _jobs(call)] == failures
    assert _slots_used(aws) == 1


def test_a_job_written_by_an_sdk_retry_of_the_put_is_answered_as_created(call, aws, monkeypatch):
    # Given a put that DynamoDB applied and the SDK sent again (the second try fails its condition)
    real = JobsStore.create

    def create_twice(self, job):
        real(self, job)
        return real(self, job)

    monkeypatch.setattr(JobsStore, "create", create_twice)
    # When a job is created, with or without a key
    plain = call("POST", "/jobs", body=JOB, headers=ACME)
    keyed = _create(call, {**JOB, "name": "keyed"}, ACME)
    # Then each is a plain 201 of the job written, counted once
    for response in (plain, keyed):
        assert response["statusCode"] == 201
        assert "Idempotent-Replayed" not in response["headers"]
    assert len(_jobs(call)) == 2 and _slots_used(aws) == 2


def test_a_create_still_running_past_its_lock_counts_its_job_once(call, aws, clock, monkeypatch):
    # Given a first attempt that claimed the key and is still running after its lock lapsed
    first = build_services(aws.settings, aws.clients, clock)
    started = clock.now()
    claimed = newest_first_job_id(started)
    _store(aws).begin("acme", "create-1", DIGEST, started, job_id=claimed)
    clock.advance(61)
    # ... which takes its slot and writes its job just after the retry looked for the job
    real_was_deleted = IdempotencyStore.was_deleted

    def first_attempt_writes_now(self, tenant, job_id, now):
        first.quota.take("acme")
        first.jobs.create("acme", JobIn(**JOB).to_domain(), started, job_id=claimed)
        return real_was_deleted(self, tenant, job_id, now)

    monkeypatch.setattr(IdempotencyStore, "was_deleted", first_attempt_writes_now)
    # When the client retries
    retry = _create(call, JOB, ACME)
    # Then the retry's own write is refused as a duplicate: it answers the first attempt's job and
    # gives its slot back, so the tenant's one job is counted once
    assert retry["statusCode"] == 201
    assert retry["headers"]["Idempotent-Replayed"] == "true"
    assert body_of(retry)["id"] == claimed
    assert len(_jobs(call)) == 1 and _slots_used(aws) == 1


def test_a_job_deleted_before_its_create_answered_is_not_created_again(call, aws, clock, complete_fails_once):
    # Given a create that wrote its job and died before storing its response
    assert _create(call, JOB, ACME)["statusCode"] == 500
    [written] = _jobs(call)
    # ... and the client found the job and deleted it
    deleted = call("DELETE", f"/jobs/{written['id']}", headers={**ACME, "If-Match": "1"})
    assert deleted["statusCode"] == 200
    # When the create is retried with its key after the lock lapsed
    clock.advance(61)
    retry = _create(call, JOB, ACME)
    # Then 409: the deleted job is not brought back, and no slot is used
    assert retry["statusCode"] == 409
    assert body_of(retry)["error"] == "idempotency_job_deleted"
    assert written["id"] in body_of(retry)["message"]
    assert _jobs(call) == [] and _slots_used(aws) == 0
    # And every later retry with the key gets the same answer
    again = _create(call, JOB, ACME)
    assert again["statusCode"] == 409 and body_of(again) == body_of(retry)
    assert _jobs(call) == []


def test_a_job_deleted_after_its_create_answered_is_not_created_again(call):
    # Given a create that answered 201, and the job deleted since
    first = _create(call, JOB, ACME)
    call("DELETE", f"/jobs/{body_of(first)['id']}", headers={**ACME, "If-Match": "1"})
    # When the create is retried with its key
    retry = _create(call, JOB, ACME)
    # Then the stored 201 is answered again, and no job comes back
    assert retry["statusCode"] == 201 and retry["headers"]["Idempotent-Replayed"] == "true"
    assert body_of(retry) == body_of(first)
    assert _jobs(call) == []
