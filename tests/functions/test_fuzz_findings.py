"""What schemathesis found in the API (decision 0025), each pinned as a regression test."""

from __future__ import annotations

import pytest

from tests.functions.events import ACME, body_of

JOB = {"name": "n", "schedule": "@daily", "target": {"handler": "demo.echo"}}


def test_an_undeclared_method_on_a_routed_path_is_405_with_allow(call):
    """Given /jobs routes GET and POST / When TRACE /jobs is sent / Then 405 naming them in Allow."""
    response = call("TRACE", "/jobs", headers=ACME)
    assert response["statusCode"] == 405, response["body"]
    assert response["headers"]["Allow"] == "GET, POST"
    assert body_of(response)["error"] == "method_not_allowed"


def test_allow_names_a_concrete_paths_methods_not_a_templates(call):
    """Given POST /dead-letters/replay and DELETE /dead-letters/{run_id} / When OPTIONS the concrete
    path / Then Allow lists only POST (a concrete path wins over a template, as in OpenAPI)."""
    response = call("OPTIONS", "/dead-letters/replay", headers=ACME)
    assert (response["statusCode"], response["headers"]["Allow"]) == (405, "POST")


def test_an_unknown_path_is_still_404(call):
    assert call("TRACE", "/nowhere", headers=ACME)["statusCode"] == 404


@pytest.mark.parametrize(
    "content_type", ["multipart/form-data", "application/x-www-form-urlencoded", "text/plain"]
)
def test_a_body_that_is_not_json_is_415_never_500(call, content_type):
    """Given a multipart type without a boundary (Powertools raised on it: a 500) / When posted /
    Then 415, for every non-JSON type."""
    response = call(
        "POST",
        "/jobs/j1/resume",
        raw_body='{"misfire_policy": null}',
        headers={**ACME, "content-type": content_type},
    )
    assert response["statusCode"] == 415, response["body"]
    assert body_of(response)["error"] == "unsupported_media_type"


@pytest.mark.parametrize("raw", ["[null, null]", "[]", "5", '"x"'])
def test_a_body_that_is_not_an_object_is_422(call, create_job, raw):
    """Given a job / When pause gets a JSON list (Powertools read it as an absent body) / Then 422,
    and the job is not paused."""
    job = create_job(ACME)
    response = call("POST", f"/jobs/{job['id']}/pause", raw_body=raw, headers=ACME)
    assert response["statusCode"] == 422, response["body"]
    assert body_of(call("GET", f"/jobs/{job['id']}", headers=ACME))["state"] == "active"


@pytest.mark.parametrize(
    ("field", "value"),
    [("jitter_seconds", False), ("timeout_seconds", "30"), ("max_catchup", True), ("timeout_seconds", 1.5)],
)
def test_integers_are_json_integers(call, field, value):
    """Given a field the schema says is an integer / When a boolean, a string or a fraction is sent
    (pydantic's lax mode took them) / Then 422."""
    response = call("POST", "/jobs", body={**JOB, field: value}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]


def test_an_integral_number_is_an_integer(call):
    response = call("POST", "/jobs", body={**JOB, "timeout_seconds": 30.0}, headers=ACME)
    assert response["statusCode"] == 201, response["body"]
    assert body_of(response)["timeout_seconds"] == 30


@pytest.mark.parametrize(
    "body", [{"from": 0, "to": "2026-03-02T00:00:00Z"}, {"from": "2026-03-01T00:00:00Z", "to": 1e9}]
)
def test_instants_are_strings_not_epoch_numbers(call, create_job, body):
    job = create_job(ACME)
    response = call("POST", f"/jobs/{job['id']}/backfill", body=body, headers=ACME)
    assert response["statusCode"] == 422, response["body"]


def test_a_pause_note_over_the_services_limit_is_refused_by_the_model(call, create_job):
    """The model said 1000 characters and the service 500: the document now says 500."""
    job = create_job(ACME)
    response = call("POST", f"/jobs/{job['id']}/pause", body={"note": "x" * 501}, headers=ACME)
    assert response["statusCode"] == 422
    assert "note" in body_of(response)["message"]


ROOT = {"authorization": "Bearer tok-root"}


def test_an_oversized_principal_is_422_not_a_dynamodb_500(call):
    """Given a principal whose key would pass DynamoDB's 2048 bytes / When mapped / Then 422."""
    principal = "arn:aws:iam::123456789012:role/" + "r" * 2000
    response = call("PUT", "/admin/principals", body={"principal": principal, "tenant": "acme"}, headers=ROOT)
    assert response["statusCode"] == 422, response["body"]
    response = call("DELETE", "/admin/principals", query={"principal": "é" * 1000}, headers=ROOT)
    assert response["statusCode"] == 422, response["body"]


def test_a_removed_mapping_answers_204_without_a_body_type(call):
    principal = "arn:aws:iam::123456789012:role/app"
    call("PUT", "/admin/principals", body={"principal": principal, "tenant": "acme"}, headers=ROOT)
    response = call("DELETE", "/admin/principals", query={"principal": principal}, headers=ROOT)
    assert response["statusCode"] == 204
    assert not response.get("body")
    assert "application/json" not in str(response.get("headers", {}).get("Content-Type", ""))


@pytest.mark.parametrize(
    "payload", [{"": 1}, {"a": {"": True}}, {"a": [{"": None}]}], ids=["top", "nested", "in-list"]
)
def test_an_empty_key_in_a_payload_is_refused(call, payload):
    """Given a payload with an empty map key (it made the embedded DynamoDB emulator return items
    botocore could not parse: every later GET /jobs of the tenant was a 500) / When posted / Then 422
    naming it, and the tenant's list still answers."""
    response = call("POST", "/jobs", body={**JOB, "payload": payload}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]
    assert "empty key" in body_of(response)["message"]
    assert call("GET", "/jobs", headers=ACME)["statusCode"] == 200


def test_an_empty_webhook_header_name_is_refused(call):
    target = {"http": {"url": "https://hooks.example/", "headers": {"": "x"}}}
    response = call("POST", "/jobs", body={**JOB, "target": target}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]


def test_a_retry_delay_dynamodb_cannot_store_is_422_not_500(call):
    """Given base_seconds 5e-324 (within 0..86400, below DynamoDB's 1e-130) / When posted / Then 422."""
    response = call("POST", "/jobs", body={**JOB, "retry": {"base_seconds": 5e-324}}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]
