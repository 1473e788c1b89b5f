"""Retention through the API: a run whose output object expired answers 200 marked expired, runs
carry their expiry, and no run id or output state makes GET /runs/{id} answer 500."""

from __future__ import annotations

import json
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.events import ACME, body_of
from tests.aws.conftest import T0

BIG = {"blob": "x" * 6000}  # echoed back: over the 4 KiB inline limit, so the output goes to S3


def _succeeded_with_output_in_s3(call, create_job, work_queue) -> tuple[dict, str]:
    job = create_job(ACME, payload=BIG)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    assert work_queue() == ["succeeded"]
    listed = body_of(call("GET", "/runs", query={"job_id": job["id"]}, headers=ACME))["items"]
    (entry,) = [r for r in listed if r["id"] == run["id"]]
    return run, entry["output"]["ref"]


def test_get_run_whose_output_object_is_gone_answers_200_with_output_expired(
    call, create_job, work_queue, aws
):
    # Given a succeeded run whose output was stored in S3
    run, key = _succeeded_with_output_in_s3(call, create_job, work_queue)
    before = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    assert (before["output"], before["output_expired"]) == (BIG, False)
    # When the bucket's lifecycle rule has removed the object
    aws.clients.s3.delete_object(Bucket=aws.settings.bucket, Key=key)
    # Then the run still answers 200: the output is null and marked expired, the rest is intact
    response = call("GET", f"/runs/{run['id']}", headers=ACME)
    assert response["statusCode"] == 200, response["body"]
    body = body_of(response)
    assert (body["state"], body["output"], body["output_expired"]) == ("succeeded", None, True)
    assert [a["outcome"] for a in body["attempts"]] == ["succeeded"]


def test_a_listing_shows_the_output_reference_without_reading_it(call, create_job, work_queue, aws):
    # Given a run whose output object is gone / When the tenant lists runs
    run, key = _succeeded_with_output_in_s3(call, create_job, work_queue)
    aws.clients.s3.delete_object(Bucket=aws.settings.bucket, Key=key)
    response = call("GET", "/runs", headers=ACME)
    # Then the listing answers 200 with the reference, as before the object went away
    assert response["statusCode"] == 200
    (entry,) = [r for r in body_of(response)["items"] if r["id"] == run["id"]]
    assert entry["output"] == {"ref": key} and entry["output_expired"] is False


def test_a_run_shows_when_its_record_expires(call, create_job, aws):
    # Given the deployment's retention (the settings' retention_days) / When a run is created at T0
    job = create_job(ACME)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    # Then its record expires retention_days after its creation
    body = body_of(call("GET", f"/runs/{run['id']}", headers=ACME))
    expected = T0 + timedelta(days=aws.settings.retention_days)
    assert body["expires_at"] == expected.strftime("%Y-%m-%dT%H:%M:%S.000Z")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    run_id=st.text(max_size=80).filter(lambda s: "/" not in s and "?" not in s and "#" not in s),
    object_state=st.sampled_from(["kept", "deleted"]),
)
def test_get_run_never_answers_500(call, create_job, work_queue, aws, run_id, object_state):
    # Given any path segment as run id, and a real run whose output object is kept or gone
    if not hasattr(aws, "_fuzz_run"):
        aws._fuzz_run = _succeeded_with_output_in_s3(call, create_job, work_queue)
    run, key = aws._fuzz_run
    if object_state == "deleted":
        aws.clients.s3.delete_object(Bucket=aws.settings.bucket, Key=key)
    else:
        aws.clients.s3.put_object(Bucket=aws.settings.bucket, Key=key, Body=json.dumps(BIG).encode())
    # When both are read / Then neither answers a server error
    for path in (f"/runs/{run_id}", f"/runs/{run['id']}"):
        response = call("GET", path, headers=ACME)
        assert response["statusCode"] < 500, (path, response["body"])
