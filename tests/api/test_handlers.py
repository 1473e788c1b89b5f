"""Handler versions through the HTTP API (issue 29 §2, §5; decisions 0048, 0049), on the fakes: job
writes check the pinned version and the payload contract and record ``payload_version``;
``GET /handlers`` counts what refers to each version; drain marks and forced deploy-checks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from jobsched.targets.registry import job, unregister
from tests.api.events import ACME, GLOBEX, body_of

ROOT = {"authorization": "Bearer tok-root"}  # an administrator (token ops), tenant ops


class ReportV2(BaseModel):
    rows: int
    title: str = "report"


@pytest.fixture(autouse=True)
def report_versions() -> Iterator[None]:
    """``test.report`` versions 1 (no contract) and 2 (rows: int, upgrades payloads of 1)."""
    job("test.report", description="the old report")(lambda payload, ctx: payload)
    job(
        "test.report", version=2, payload=ReportV2, upgrades={1: lambda p: {"rows": len(p.get("lines", []))}}
    )(lambda payload, ctx: payload)
    yield
    unregister("test.report")


def _job(**target_and_payload):
    return {"name": "r", "schedule": "0 3 * * *", **target_and_payload}


def _listed(body, name="test.report"):
    return {h["version"]: h for h in body["handlers"] if h["name"] == name}


# --- job writes -------------------------------------------------------------------------------------


def test_an_unpinned_job_is_checked_against_the_newest_version_and_records_it(call):
    # When a job names test.report without a version and a payload version 2 accepts
    response = call(
        "POST", "/jobs", body=_job(target={"handler": "test.report"}, payload={"rows": 3}), headers=ACME
    )
    # Then it is created with payload_version 2 (the newest)
    assert response["statusCode"] == 201, response["body"]
    assert body_of(response)["payload_version"] == 2


def test_a_payload_the_contract_refuses_is_a_422_naming_the_field(call):
    # When the payload lacks rows, which version 2 requires
    response = call(
        "POST", "/jobs", body=_job(target={"handler": "test.report"}, payload={"lines": []}), headers=ACME
    )
    # Then 422 names payload.rows, and no job is written
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("payload.rows:")
    assert body_of(call("GET", "/jobs", headers=ACME))["items"] == []


def test_a_pinned_version_is_checked_against_its_own_contract(call):
    # When a job pins version 1 (no contract) with a payload version 2 would refuse
    response = call(
        "POST",
        "/jobs",
        body=_job(target={"handler": "test.report", "version": 1}, payload={"lines": []}),
        headers=ACME,
    )
    # Then it is created, recording payload version 1 and its pin
    assert response["statusCode"] == 201, response["body"]
    assert (body_of(response)["payload_version"], body_of(response)["target"]) == (
        1,
        {"handler": "test.report", "version": 1},
    )


def test_pinning_an_unregistered_version_is_a_422_naming_target_version(call):
    response = call("POST", "/jobs", body=_job(target={"handler": "test.report", "version": 7}), headers=ACME)
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("target.version:")


def test_an_edit_of_the_payload_is_checked_and_records_the_version(call, create_job):
    created = create_job(ACME, target={"handler": "test.report", "version": 1}, payload={"lines": ["a"]})
    headers = {**ACME, "If-Match": str(created["version"])}
    # When the edit unpins the job with a payload the newest version refuses, then with one it takes
    refused = call(
        "PATCH", f"/jobs/{created['id']}", body={"target": {"handler": "test.report"}}, headers=headers
    )
    assert refused["statusCode"] == 422 and body_of(refused)["message"].startswith("payload.rows:")
    edited = call(
        "PATCH",
        f"/jobs/{created['id']}",
        body={"target": {"handler": "test.report"}, "payload": {"rows": 1}},
        headers=headers,
    )
    # Then the refused edit changed nothing and the accepted one records payload version 2
    assert edited["statusCode"] == 200, edited["body"]
    assert body_of(edited)["payload_version"] == 2


def test_an_edit_of_other_fields_keeps_a_job_written_before_versions_existed(call, create_job, aws):
    # Given a job whose payload the newest contract refuses, stored as before versions existed
    created = create_job(ACME, target={"handler": "test.report", "version": 1}, payload={"lines": []})
    from jobsched.aws.jobs_store import JobsStore

    store = JobsStore(aws.clients.dynamodb, aws.settings.jobs_table)
    old = store.get("acme", created["id"])
    from dataclasses import replace

    store.replace(
        replace(old, target={"handler": "test.report"}, payload_version=None, version=old.version + 1),
        old.version,
    )
    # When only its description is edited
    edited = call(
        "PATCH",
        f"/jobs/{created['id']}",
        body={"description": "still nightly"},
        headers={**ACME, "If-Match": str(old.version + 1)},
    )
    # Then the edit is accepted and the job keeps its (absent) payload version
    assert edited["statusCode"] == 200, edited["body"]
    assert (body_of(edited)["description"], body_of(edited)["payload_version"]) == ("still nightly", None)


# --- GET /handlers ----------------------------------------------------------------------------------


def test_handlers_lists_each_version_with_its_jobs_and_queued_runs(call, create_job):
    # Given acme's jobs: one pinned to version 1, two unpinned (one run now); globex's unpinned job
    pinned = create_job(ACME, target={"handler": "test.report", "version": 1}, payload={})
    unpinned = create_job(ACME, target={"handler": "test.report"}, payload={"rows": 1})
    create_job(ACME, target={"handler": "test.report"}, payload={"rows": 2})
    create_job(GLOBEX, target={"handler": "test.report"}, payload={"rows": 3})
    run = body_of(call("POST", f"/jobs/{unpinned['id']}/trigger", headers=ACME))
    # When acme lists the handlers
    body = body_of(call("GET", "/handlers", headers=ACME))
    listed = _listed(body)
    # Then version 1 has the pinned job, version 2 (the newest) the unpinned ones and the queued run
    assert body["scope"] == "tenant"
    assert (listed[1]["jobs"], listed[1]["queued"], listed[1]["newest"], listed[1]["status"]) == (
        1,
        0,
        False,
        "active",
    )
    assert (listed[2]["jobs"], listed[2]["queued"], listed[2]["newest"]) == (2, 1, True)
    assert listed[1]["examples"] == {"jobs": [pinned["id"]], "runs": []}
    assert listed[2]["examples"]["runs"] == [run["id"]]
    assert listed[2]["payload_schema"]["required"] == ["rows"] and listed[2]["upgrades_from"] == [1]
    assert body["unpinned_payload_versions"]["test.report"] == {"2": 2}
    assert body["missing"] == []


def test_an_administrator_sees_every_tenant_with_scope_all(call, create_job):
    create_job(ACME, target={"handler": "test.report"}, payload={"rows": 1})
    create_job(GLOBEX, target={"handler": "test.report"}, payload={"rows": 1})
    # When the administrator asks for every tenant, and a tenant asks the same
    everyone = call("GET", "/handlers", headers=ROOT, query={"scope": "all"})
    refused = call("GET", "/handlers", headers=ACME, query={"scope": "all"})
    # Then the administrator counts both tenants' jobs; the tenant is refused
    assert everyone["statusCode"] == 200 and body_of(everyone)["scope"] == "all"
    assert _listed(body_of(everyone))[2]["jobs"] == 2
    assert refused["statusCode"] == 403


def test_dead_letters_count_for_the_version_and_removed_handlers_are_missing(call, create_job, work_queue):
    # Given a dead letter of demo.fail, and a job of a handler then removed from the code
    failing = create_job(ACME, target={"handler": "demo.fail"}, payload={"kind": "permanent"})
    call("POST", f"/jobs/{failing['id']}/trigger", headers=ACME)
    assert work_queue() == ["dead_lettered"]
    job("test.gone")(lambda payload, ctx: None)
    gone = create_job(ACME, target={"handler": "test.gone"})
    unregister("test.gone")
    # When the handlers are listed
    body = body_of(call("GET", "/handlers", headers=ACME))
    # Then the dead letter counts for demo.fail version 1, and test.gone is listed missing
    assert _listed(body, "demo.fail")[1]["dead_lettered"] == 1
    [missing] = body["missing"]
    assert (missing["name"], missing["version"], missing["jobs"], missing["examples"]["jobs"]) == (
        "test.gone",
        None,
        1,
        [gone["id"]],
    )


# --- draining ---------------------------------------------------------------------------------------


def test_a_draining_version_refuses_new_pins_and_shows_drained_once_unused(call, create_job):
    pinned = create_job(ACME, target={"handler": "test.report", "version": 1}, payload={})
    # When the administrator marks version 1 draining
    marked = call("POST", "/handlers/test.report/versions/1/drain", headers=ROOT)
    assert marked["statusCode"] == 200 and body_of(marked)["status"] == "draining"
    # Then a new job pinning it is refused with 409, and the job that pins it keeps it counted
    refused = call("POST", "/jobs", body=_job(target={"handler": "test.report", "version": 1}), headers=ACME)
    assert refused["statusCode"] == 409 and body_of(refused)["error"] == "handler_version_draining"
    # And once that job is deleted the version shows drained
    call("DELETE", f"/jobs/{pinned['id']}", headers={**ACME, "If-Match": str(pinned["version"])})
    listed = _listed(body_of(call("GET", "/handlers", headers=ROOT, query={"scope": "all"})))
    assert (listed[1]["status"], listed[1]["jobs"]) == ("drained", 0)
    # And un-marking it makes it active again
    assert (
        body_of(call("DELETE", "/handlers/test.report/versions/1/drain", headers=ROOT))["status"] == "active"
    )


def test_the_newest_version_cannot_drain_and_only_administrators_drain(call):
    assert call("POST", "/handlers/test.report/versions/2/drain", headers=ROOT)["statusCode"] == 409
    assert call("POST", "/handlers/test.report/versions/1/drain", headers=ACME)["statusCode"] == 403
    assert call("POST", "/handlers/test.report/versions/9/drain", headers=ROOT)["statusCode"] == 404
    assert call("POST", "/handlers/test.report/versions/x/drain", headers=ROOT)["statusCode"] == 404


# --- deploy-checks ----------------------------------------------------------------------------------


def test_a_forced_deploy_check_is_recorded_and_listed(call, clock):
    problem = {"name": "test.report", "version": 1, "jobs": 1}
    body = {"forced": True, "code_version": "abc123", "problems": [problem]}
    # When the administrator records a forced deploy-check
    recorded = call("POST", "/handlers/deploy-checks", body=body, headers=ROOT)
    # Then it is stored with when and by whom, and listed newest first
    assert recorded["statusCode"] == 201, recorded["body"]
    assert body_of(recorded)["recorded_by"] == "token:ops"
    listed = body_of(call("GET", "/handlers/deploy-checks", headers=ROOT))["items"]
    assert [(c["code_version"], c["problems"]) for c in listed] == [("abc123", [problem])]
    assert (
        call("POST", "/handlers/deploy-checks", body={**body, "forced": False}, headers=ROOT)["statusCode"]
        == 422
    )
    assert call("GET", "/handlers/deploy-checks", headers=ACME)["statusCode"] == 403


@pytest.mark.parametrize(
    ("problems", "says"),
    [
        ([{"name": "r", "n": 5.4e254}], "problems[0].n"),  # beyond DynamoDB's numbers
        ([{"": 1}], "empty key"),
        ([{"name": "x" * 70_000}], "at most 65536"),
    ],
)
def test_a_deploy_check_that_could_not_be_stored_is_a_422_naming_why(call, problems, says):
    body = {"forced": True, "code_version": "abc123", "problems": problems}
    response = call("POST", "/handlers/deploy-checks", body=body, headers=ROOT)
    assert response["statusCode"] == 422, response["body"]
    assert says in body_of(response)["message"]
    assert body_of(call("GET", "/handlers/deploy-checks", headers=ROOT))["items"] == []


# --- OpenAPI ----------------------------------------------------------------------------------------


def test_openapi_shows_each_versions_payload_schema(call):
    document = body_of(call("GET", "/openapi.json"))
    schemas = document["components"]["schemas"]
    assert schemas["Payload_test.report_v2"]["required"] == ["rows"]
    assert (
        "#/components/schemas/Payload_test.report_v2"
        in schemas["JobIn"]["properties"]["payload"]["description"]
    )
    assert "version" in schemas["TargetIn"]["properties"]
