"""What schemathesis found in the API (decision 0025), each pinned as a regression test."""

from __future__ import annotations

import pytest

from tests.api.events import ACME, body_of

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


@pytest.mark.parametrize("name", [" ", "\u0085", "\u00a0\t"])
def test_a_header_name_of_white_space_only_is_refused_and_the_document_says_so(call, name):
    """Given a webhook header name of white space only (schemathesis sent "\u0085", which the model
    strips to an empty name: issue 27 §5, seed 16's stateful phase), Then it is a 422, and the
    document's header names carry a pattern that refuses it, so a schema-valid name is accepted."""
    import re

    target = {"http": {"url": "https://hooks.example/", "headers": {name: "x"}}}
    response = call("POST", "/jobs", body={**JOB, "target": target}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]
    names = _document(call)["components"]["schemas"]["HttpTargetIn"]["properties"]["headers"]["propertyNames"]
    assert not re.search(names["pattern"], name) and re.search(names["pattern"], "X-Trace")


def test_a_retry_delay_dynamodb_cannot_store_is_422_not_500(call):
    """Given base_seconds 5e-324 (within 0..86400, below DynamoDB's 1e-130) / When posted / Then 422."""
    response = call("POST", "/jobs", body={**JOB, "retry": {"base_seconds": 5e-324}}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]


# --- the first clean run of the schemathesis test (tests/fuzz/test_schemathesis.py) ---------------

OPS = {"authorization": "Bearer tok-root"}
WORKFLOW = {"name": "w", "schedule": "@daily", "nodes": [{"id": "a", "target": {"handler": "demo.echo"}}]}


def _document(call) -> dict:
    return body_of(call("GET", "/openapi.json"))


def test_the_week_before_the_first_day_is_the_days_there_are_not_a_500(call):
    """Given to=0001-01-03 and no from / When GET /usage / Then 200 for 0001-01-01..03 (the default
    window, 6 days before to, overflowed: a 500)."""
    response = call("GET", "/usage", query={"to": "0001-01-03"}, headers=ACME)
    assert response["statusCode"] == 200, response["body"]
    assert (body_of(response)["first_day"], body_of(response)["last_day"]) == ("0001-01-01", "0001-01-03")


@pytest.mark.parametrize("day", ["20261201", "2026-W49-2"])
def test_a_usage_day_is_yyyy_mm_dd_as_the_document_says(call, day):
    """Given a day ``date.fromisoformat`` reads but the document's ``format: date`` does not / When
    GET /usage?to= it / Then 422."""
    response = call("GET", "/usage", query={"to": day}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]


def test_usage_documents_its_403_and_its_parameters(call):
    """Given a tenant naming another tenant in GET /usage?tenant= (403) / Then the document lists
    403, from/to as dates and tenant with the tenant pattern."""
    assert call("GET", "/usage", query={"tenant": "globex"}, headers=ACME)["statusCode"] == 403
    operation = _document(call)["paths"]["/usage"]["get"]
    assert "403" in operation["responses"]
    schemas = {p["name"]: p["schema"]["anyOf"][0] for p in operation["parameters"]}
    assert schemas["from"]["format"] == schemas["to"]["format"] == "date"
    assert schemas["tenant"]["pattern"].startswith("^[A-Za-z0-9]")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/jobs", {**JOB, "concurrency": {"limit": 2.0}}),
        ("/jobs", {**JOB, "rate_limit": {"per_second": 1, "burst": 3.0}}),
        ("/workflows", {**WORKFLOW, "jitter_seconds": 5.0, "max_catchup": 10.0}),
        ("/workflows", {**WORKFLOW, "nodes": [{**WORKFLOW["nodes"][0], "timeout_seconds": 300.0}]}),
    ],
)
def test_an_integral_number_is_an_integer_in_limits_and_workflows(call, path, body):
    """Given a JSON integer written with a fraction of zero (JSON Schema's integer; the job fields
    took it, the limits and workflow fields refused it) / When posted / Then 201."""
    response = call("POST", path, body=body, headers=ACME)
    assert response["statusCode"] == 201, response["body"]


@pytest.mark.parametrize("body", [{"max_running": "5"}, {"max_running": True}, {"runs_per_second": "2"}])
def test_tenant_limits_take_json_numbers_only(call, body):
    """Given a limit written as a string or a boolean (the lax model read "5" as 5) / When an
    administrator puts it / Then 422, as for every other request body."""
    response = call("PUT", "/admin/tenants/acme/limits", body=body, headers=OPS)
    assert response["statusCode"] == 422, response["body"]


@pytest.mark.parametrize("number", [10**38 - 1, -(10**38 - 1)])
def test_a_38_digit_integer_is_stored_and_read_back(call, create_job, number):
    """Given the largest 38-digit integers (refused before: the limit was the largest such double) /
    When a job's payload holds one / Then it is stored and answered unchanged."""
    job = create_job(ACME, payload={"n": number})
    assert body_of(call("GET", f"/jobs/{job['id']}", headers=ACME))["payload"] == {"n": number}


def test_the_document_states_the_integer_bound_as_a_decimal_exact_double(call):
    """Given the document's StorableValue / Then its integers are below 1e38 exclusively: the
    inclusive 99999999999999978859343891977453174784 was written 9.999999999999998e+37, whose decimal
    reading is larger (schemathesis sent 99999999999999979999999999999999999999, refused)."""
    variants = _document(call)["components"]["schemas"]["StorableValue"]["anyOf"]
    integer = next(v for v in variants if v.get("type") == "integer")
    assert (integer["exclusiveMinimum"], integer["exclusiveMaximum"]) == (-1e38, 1e38)
    assert "maximum" not in integer


def test_the_document_says_which_limit_fields_go_together(call):
    """Given a key without a limit (refused by the model, allowed by the document: schemathesis's
    positive cases were refused) / Then the document's limit objects state it, and the workflow
    PATCH takes no null (as the job PATCH)."""
    schemas = _document(call)["components"]["schemas"]
    assert {"properties": {"limit": {"type": "integer"}}, "required": ["limit"]} in schemas["ConcurrencyIn"][
        "anyOf"
    ]
    assert {"properties": {"per_second": {"type": "number"}}, "required": ["per_second"]} in schemas[
        "RateLimitIn"
    ]["anyOf"]
    assert len(schemas["TenantLimitIn"]["anyOf"]) == 2
    assert all(
        {"type": "null"} not in v.get("anyOf", []) for v in schemas["WorkflowPatch"]["properties"].values()
    )
    response = call("POST", "/jobs", body={**JOB, "concurrency": {"key": "k", "limit": None}}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]


@pytest.mark.parametrize("key", [" a ", "\u00a0", "\t"])
def test_a_payload_key_is_kept_as_sent(call, create_job, key):
    """Given a payload key with white space at its ends (the models strip their strings, and took
    the keys of payloads for theirs: ``" a "`` was stored as ``"a"``, ``"\\u00a0"`` refused as empty)
    When a job and a workflow are created with it / Then the payload comes back as sent."""
    job = create_job(ACME, payload={key: 1, "a": 2})
    assert body_of(call("GET", f"/jobs/{job['id']}", headers=ACME))["payload"] == {key: 1, "a": 2}
    response = call("POST", "/workflows", body={**WORKFLOW, "payload": {key: 1}}, headers=ACME)
    assert response["statusCode"] == 201, response["body"]
    assert body_of(response)["payload"] == {key: 1}


@pytest.mark.parametrize("field", ["concurrency", "rate_limit"])
def test_the_document_states_the_limit_key_pattern(call, field):
    """Given a limit key the job service refuses (the document allowed any string: schemathesis's
    positive case was refused) / Then the document carries the service's pattern, and the API
    refuses such a key with 422."""
    schemas = _document(call)["components"]["schemas"]
    name = {"concurrency": "ConcurrencyIn", "rate_limit": "RateLimitIn"}[field]
    assert schemas[name]["properties"]["key"]["anyOf"][0]["pattern"].startswith("^[A-Za-z0-9]")
    limit = {
        "concurrency": {"key": "\u00ed x", "limit": 1},
        "rate_limit": {"key": "\u00ed x", "per_second": 1},
    }
    response = call("POST", "/jobs", body={**JOB, field: limit[field]}, headers=ACME)
    assert response["statusCode"] == 422, response["body"]


def test_a_links_if_match_is_an_etag_string(call):
    """Given the link from a created job to its DELETE / Then If-Match is the quoted version, a
    string (the bare expression gave the number 4, which a client cannot send as a header)."""
    links = _document(call)["paths"]["/jobs"]["post"]["responses"]["201"]["links"]
    assert links["DeleteJob"]["parameters"]["header.if-match"] == '"{$response.body#/version}"'
    workflow_links = _document(call)["paths"]["/workflows"]["post"]["responses"]["201"]["links"]
    assert {"GetWorkflow", "UpdateWorkflow", "TriggerWorkflow", "ListWorkflowRuns"} <= set(workflow_links)


def test_a_percent_encoded_path_parameter_is_decoded(call):
    """Given a tenant ``a@E`` sent percent-encoded (``a%40E``, as clients encode ``@`` in a path;
    the route matched the raw path, so the tenant pattern refused it: a schema-valid request refused)
    When an administrator reads its limits / Then 200 for tenant ``a@E``."""
    response = call("GET", "/admin/tenants/a%40E/limits", headers=OPS)
    assert response["statusCode"] == 200, response["body"]
    assert body_of(response)["tenant"] == "a@E"


@pytest.mark.parametrize(("put", "post"), [("JobPut", "JobIn"), ("WorkflowPut", "WorkflowIn")])
def test_a_by_name_put_body_states_the_rules_of_the_post_body_it_mirrors(call, put, post):
    """Given PUT /workflows/by-name/{name}'s body with a payload of 3.5e-227, which DynamoDB cannot store
    (schemathesis, clean-clone CI 2026-12-06: "schema-valid request rejected", the document's payload
    was any object) / When the document is read / Then the PUT bodies' payload, timezone and schedule
    say what the POST bodies' do: StorableValue, the TimeZone enum, the schedule format."""
    schemas = body_of(call("GET", "/openapi.json"))["components"]["schemas"]
    for prop in ("payload", "timezone", "schedule"):
        expected = {k: v for k, v in schemas[post]["properties"][prop].items() if k != "title"}
        actual = {k: v for k, v in schemas[put]["properties"][prop].items() if k != "title"}
        assert actual == expected, prop
    assert schemas[put]["properties"]["payload"]["additionalProperties"] == {
        "$ref": "#/components/schemas/StorableValue"
    }
