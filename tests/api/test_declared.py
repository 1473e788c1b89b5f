"""Schedules as code over the API: ``PUT /jobs/by-name/{name}``, ``PUT /workflows/by-name/{name}`` and
``GET /declared``, against the in-memory tables and queues at a fixed clock (decision 0060)."""

from __future__ import annotations

import threading
from datetime import timedelta
from urllib.parse import quote

from jobsched.aws.jobs_store import NAME_MARK
from tests.api.conftest import JOB
from tests.api.events import ACME, GLOBEX, body_of

DEFINITION = {k: v for k, v in JOB.items() if k != "name"}
#: Every minute: the create dispatches the occurrences within the look-ahead at once.
MINUTELY = {**DEFINITION, "schedule": "* * * * *"}
WORKFLOW = {
    "schedule": "0 3 * * *",
    "nodes": [
        {"id": "extract", "target": {"handler": "demo.echo"}},
        {"id": "load", "target": {"handler": "demo.echo"}, "depends_on": ["extract"]},
    ],
}


def _put(call, name, body, headers=ACME, kind="jobs", **query):
    return call("PUT", f"/{kind}/by-name/{quote(name, safe='')}", body=body, headers=headers, query=query)


def _runs(call, job_id, headers=ACME):
    history = body_of(call("GET", f"/jobs/{job_id}/runs", headers=headers))["items"]
    upcoming = body_of(call("GET", f"/jobs/{job_id}/runs", headers=headers, query={"upcoming": "true"}))[
        "items"
    ]
    return sorted(r["id"] for r in history + upcoming)


def _jobs(call, headers=ACME):
    return body_of(call("GET", "/jobs", headers=headers))["items"]


# --- create, unchanged, updated -------------------------------------------------------------------


def test_a_new_name_is_created_with_201_and_the_job(call):
    # Given no job named "nightly report"
    # When it is declared
    response = _put(call, "nightly report", DEFINITION)
    # Then 201: the job, created, with its version as ETag
    assert response["statusCode"] == 201, response["body"]
    out = body_of(response)
    assert (out["name"], out["outcome"], out["changed_fields"], out["dry_run"]) == (
        "nightly report",
        "created",
        [],
        False,
    )
    assert out["job"]["name"] == "nightly report" and out["job"]["version"] == 1
    assert response["headers"]["ETag"] == '"1"'
    assert [j["id"] for j in _jobs(call)] == [out["job"]["id"]]


def test_the_same_definition_again_is_unchanged_no_version_bump_no_second_run(call):
    # Given a minutely job declared once (its first occurrences queued ahead at once)
    first = body_of(_put(call, "tick", MINUTELY))
    runs_before = _runs(call, first["job"]["id"])
    assert runs_before
    # When the same definition is declared again
    response = _put(call, "tick", MINUTELY)
    # Then 200 unchanged: same job, same version and cursor, and not one run more
    assert response["statusCode"] == 200
    again = body_of(response)
    assert (again["outcome"], again["changed_fields"]) == ("unchanged", [])
    assert again["job"]["id"] == first["job"]["id"]
    assert again["job"]["version"] == 1
    assert again["job"]["updated_at"] == first["job"]["updated_at"]
    assert again["job"]["next_fire_times"] == first["job"]["next_fire_times"]
    assert _runs(call, first["job"]["id"]) == runs_before
    assert len(_jobs(call)) == 1


def test_the_defaults_spelled_out_are_the_same_definition(call):
    # Given a job declared with only the required fields
    _put(call, "nightly", DEFINITION)
    # When it is declared again with its defaults written out
    spelled = {**DEFINITION, "timezone": "UTC", "priority": "default", "pool": "lambda", "jitter_seconds": 0}
    again = body_of(_put(call, "nightly", spelled))
    # Then nothing changed
    assert (again["outcome"], again["job"]["version"]) == ("unchanged", 1)


def test_a_changed_definition_is_updated_by_patch_rules_naming_the_changed_fields(call, clock):
    # Given a daily 03:00 job, declared
    first = body_of(_put(call, "nightly", DEFINITION))
    clock.advance(timedelta(minutes=5))
    # When it is declared with another hour and a payload
    response = _put(call, "nightly", {**DEFINITION, "schedule": "0 5 * * *", "payload": {"a": 1}})
    # Then 200 updated: version 2, the changed fields named, the schedule recomputed from the edit
    assert response["statusCode"] == 200
    out = body_of(response)
    assert (out["outcome"], out["changed_fields"]) == ("updated", ["payload", "schedule"])
    assert out["job"]["id"] == first["job"]["id"]
    assert out["job"]["version"] == 2 and response["headers"]["ETag"] == '"2"'
    assert out["job"]["next_fire_times"][0] == "2026-03-03T05:00:00.000Z"
    assert out["job"]["payload"] == {"a": 1}


def test_a_field_left_out_goes_back_to_its_default(call):
    # Given a job declared with jitter
    _put(call, "nightly", {**DEFINITION, "jitter_seconds": 30})
    # When it is declared without it
    out = body_of(_put(call, "nightly", DEFINITION))
    # Then the declaration is the whole definition: jitter back to 0
    assert (out["outcome"], out["changed_fields"], out["job"]["jitter_seconds"]) == (
        "updated",
        ["jitter_seconds"],
        0,
    )


def test_a_paused_job_stays_paused_when_its_declaration_changes(call):
    # Given a declared job, paused
    first = body_of(_put(call, "nightly", DEFINITION))
    call("POST", f"/jobs/{first['job']['id']}/pause", headers=ACME)
    # When its declaration changes
    out = body_of(_put(call, "nightly", {**DEFINITION, "description": "reports"}))
    # Then it is updated and still paused (PATCH's rule)
    assert (out["outcome"], out["job"]["state"], out["job"]["version"]) == ("updated", "paused", 3)


# --- dry run ----------------------------------------------------------------------------------------


def test_a_dry_run_says_what_would_happen_and_writes_nothing(call):
    # Given no job
    # When a new name is declared as a dry run
    response = _put(call, "nightly", DEFINITION, dry_run="true")
    # Then 200 with "created" and no job, and nothing is stored
    out = body_of(response)
    assert response["statusCode"] == 200
    assert (out["outcome"], out["dry_run"], out["job"]) == ("created", True, None)
    assert _jobs(call) == [] and body_of(call("GET", "/declared", headers=ACME))["items"] == []
    # And a dry run of a change names the fields and leaves the job at its version
    _put(call, "nightly", DEFINITION)
    change = body_of(_put(call, "nightly", {**DEFINITION, "schedule": "0 4 * * *"}, dry_run="true"))
    assert (change["outcome"], change["changed_fields"], change["job"]["version"]) == (
        "updated",
        ["schedule"],
        1,
    )
    assert _jobs(call)[0]["schedule"] == "0 3 * * *"


def test_a_dry_run_of_a_bad_definition_is_the_same_422(call):
    response = _put(call, "nightly", {**DEFINITION, "schedule": "0 25 * * *"}, dry_run="true")
    assert response["statusCode"] == 422
    assert "25" in body_of(response)["message"]


# --- bad input ------------------------------------------------------------------------------------


def _store(app):
    return app.services.jobs.jobs


def test_a_bad_definition_is_422_and_writes_nothing_not_even_the_name(call, app):
    # When a name is declared with an unknown handler
    response = _put(call, "nightly", {**DEFINITION, "target": {"handler": "no.such"}})
    # Then 422 naming it, no job, and the name is not claimed
    assert response["statusCode"] == 422
    assert "no.such" in body_of(response)["message"]
    assert _jobs(call) == []
    assert _store(app).name_ref("acme", "nightly") is None
    assert (
        _store(app).dynamo.get(_store(app).table, {"tenant": "acme", "job_id": f"{NAME_MARK}nightly"}) is None
    )


def test_a_name_in_the_body_is_422_naming_the_field(call):
    response = _put(call, "nightly", {**DEFINITION, "name": "nightly"})
    assert response["statusCode"] == 422
    assert body_of(response)["message"] == "name: the name is the path's: leave it out of the body"
    assert _jobs(call) == []


def test_an_unknown_field_is_422_naming_it(call):
    response = _put(call, "nightly", {**DEFINITION, "shedule": "0 4 * * *"})
    assert response["statusCode"] == 422
    assert "shedule" in body_of(response)["message"]


def test_a_name_with_surrounding_spaces_is_422(call):
    response = _put(call, " nightly", DEFINITION)
    assert response["statusCode"] == 422
    assert body_of(response)["message"].startswith("name: String should match pattern")
    assert _jobs(call) == []


def test_a_name_with_a_slash_and_inner_spaces_is_declared_percent_encoded(call):
    response = _put(call, "reports/daily sales", DEFINITION)
    assert response["statusCode"] == 201, response["body"]
    assert body_of(response)["job"]["name"] == "reports/daily sales"
    assert body_of(_put(call, "reports/daily sales", DEFINITION))["outcome"] == "unchanged"


# --- uniqueness -----------------------------------------------------------------------------------


def test_concurrent_puts_of_one_new_name_create_one_job(call):
    # Given eight callers declaring the same new name at the same time
    answers: list[dict] = []
    start = threading.Barrier(8)

    def declare() -> None:
        start.wait()
        answers.append(_put(call, "race", MINUTELY))

    threads = [threading.Thread(target=declare) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then one job exists; one answer created it, the others found it unchanged
    statuses = sorted(a["statusCode"] for a in answers)
    assert statuses == [200] * 7 + [201], [a["body"] for a in answers]
    jobs = _jobs(call)
    assert len(jobs) == 1 and jobs[0]["version"] == 1
    assert {body_of(a)["job"]["id"] for a in answers} == {jobs[0]["id"]}


def test_a_put_that_died_after_claiming_the_name_is_finished_under_its_id(call, app, clock):
    # Given a name claimed a moment ago for id jdead by a PUT that never created the job
    assert _store(app).claim_name("acme", "nightly", "jdead", clock.now())
    # When the name is declared
    out = body_of(_put(call, "nightly", DEFINITION))
    # Then the job is created under the claimed id: one id per name
    assert (out["outcome"], out["job"]["id"]) == ("created", "jdead")


def test_a_deleted_declared_job_is_declared_again_under_a_new_id(call):
    # Given a declared job, deleted
    first = body_of(_put(call, "nightly", DEFINITION))["job"]
    call("DELETE", f"/jobs/{first['id']}", headers={**ACME, "If-Match": '"1"'})
    assert body_of(call("GET", "/declared", headers=ACME))["items"] == []
    # When the name is declared again
    response = _put(call, "nightly", DEFINITION)
    # Then a new job, under a new id (its runs cannot meet the old job's)
    assert response["statusCode"] == 201
    assert body_of(response)["job"]["id"] != first["id"]


def test_a_job_renamed_by_patch_leaves_its_old_name_free(call, clock):
    # Given a declared job renamed by PATCH a while ago
    first = body_of(_put(call, "nightly", DEFINITION))["job"]
    call("PATCH", f"/jobs/{first['id']}", body={"name": "renamed"}, headers={**ACME, "If-Match": '"1"'})
    clock.advance(timedelta(minutes=2))
    # When the old name is declared
    response = _put(call, "nightly", DEFINITION)
    # Then it names a new job; the renamed one is left as it is
    assert response["statusCode"] == 201
    names = sorted(j["name"] for j in _jobs(call))
    assert names == ["nightly", "renamed"]


def test_a_job_created_by_post_is_adopted_by_its_name(call, create_job):
    # Given a job created by POST, named "nightly report"
    posted = create_job(ACME)
    # When that name is declared with the same definition
    out = body_of(_put(call, "nightly report", DEFINITION))
    # Then the POSTed job is the declared one, unchanged, and is listed as declared
    assert (out["outcome"], out["job"]["id"], out["job"]["version"]) == ("unchanged", posted["id"], 1)
    declared = body_of(call("GET", "/declared", headers=ACME))["items"]
    assert declared == [{"name": "nightly report", "kind": "job", "id": posted["id"], "version": 1}]
    assert body_of(call("GET", "/declared", headers=ACME))["next_cursor"] is None


def test_two_posted_jobs_with_the_name_are_a_409_naming_both(call, create_job):
    a, b = create_job(ACME), create_job(ACME)
    response = _put(call, "nightly report", DEFINITION)
    assert response["statusCode"] == 409
    message = body_of(response)["message"]
    assert a["id"] in message and b["id"] in message
    assert len(_jobs(call)) == 2


def test_names_are_per_tenant(call):
    acme = body_of(_put(call, "nightly", DEFINITION))
    globex = _put(call, "nightly", DEFINITION, headers=GLOBEX)
    assert globex["statusCode"] == 201
    assert body_of(globex)["job"]["id"] != acme["job"]["id"]
    assert [d["name"] for d in body_of(call("GET", "/declared", headers=GLOBEX))["items"]] == ["nightly"]


def test_the_tenant_job_limit_counts_a_declared_job_and_a_refusal_claims_nothing(make_app, aws):
    from tests.api.events import http_event

    app = make_app(max_jobs=1)
    first = app.resolve(http_event("PUT", "/jobs/by-name/one", body=DEFINITION, headers=ACME), None)
    assert first["statusCode"] == 201
    refused = app.resolve(http_event("PUT", "/jobs/by-name/two", body=DEFINITION, headers=ACME), None)
    assert refused["statusCode"] == 409, refused["body"]
    again = app.resolve(http_event("PUT", "/jobs/by-name/one", body=DEFINITION, headers=ACME), None)
    assert body_of(again)["outcome"] == "unchanged"
    listed = app.resolve(http_event("GET", "/declared", headers=ACME), None)
    assert [d["name"] for d in body_of(listed)["items"]] == ["one"]


# --- workflows ------------------------------------------------------------------------------------


def test_a_workflow_is_declared_compared_and_updated_by_its_name(call):
    created = _put(call, "etl", WORKFLOW, kind="workflows")
    assert created["statusCode"] == 201, created["body"]
    workflow = body_of(created)["workflow"]
    assert [n["id"] for n in workflow["nodes"]] == ["extract", "load"]
    again = body_of(_put(call, "etl", WORKFLOW, kind="workflows"))
    assert (again["outcome"], again["workflow"]["version"]) == ("unchanged", 1)
    nodes = [*WORKFLOW["nodes"], {"id": "report", "target": {"handler": "demo.echo"}, "depends_on": ["load"]}]
    changed = body_of(_put(call, "etl", {**WORKFLOW, "nodes": nodes}, kind="workflows"))
    assert (changed["outcome"], changed["changed_fields"], changed["workflow"]["version"]) == (
        "updated",
        ["nodes"],
        2,
    )
    declared = body_of(call("GET", "/declared", headers=ACME))["items"]
    assert [(d["name"], d["kind"], d["version"]) for d in declared] == [("etl", "workflow", 2)]


def test_a_name_declared_as_a_job_is_a_409_as_a_workflow(call):
    _put(call, "etl", DEFINITION)
    response = _put(call, "etl", WORKFLOW, kind="workflows")
    assert response["statusCode"] == 409
    assert "declared as a job" in body_of(response)["message"]


def test_a_workflow_declaration_with_a_target_is_422_naming_it(call):
    response = _put(call, "etl", {**WORKFLOW, "target": {"handler": "demo.echo"}}, kind="workflows")
    assert response["statusCode"] == 422
    assert "target" in body_of(response)["message"]


def test_openapi_documents_the_by_name_routes_with_their_outcomes_and_dry_run(call):
    document = body_of(call("GET", "/openapi.json"))
    put = document["paths"]["/jobs/by-name/{name}"]["put"]
    assert {"200", "201", "409", "422"} <= set(put["responses"])
    assert "dry_run" in {p["name"] for p in put["parameters"]}
    schema = document["components"]["schemas"]["DeclaredJobOut"]
    assert {"name", "outcome", "changed_fields", "dry_run", "job"} <= set(schema["properties"])
    assert "/workflows/by-name/{name}" in document["paths"] and "/declared" in document["paths"]


def test_a_dry_run_of_a_new_job_refuses_a_notify_topic_the_deployment_does_not_allow(call):
    body = {**DEFINITION, "notify": {"sns_topic_arn": "arn:aws:sns:us-east-1:123456789012:elsewhere"}}
    dry = _put(call, "nightly", body, dry_run="true")
    real = _put(call, "nightly", body)
    assert (dry["statusCode"], real["statusCode"]) == (422, 422)
    assert body_of(dry)["message"] == body_of(real)["message"]
    assert body_of(dry)["message"].startswith("notify")


def test_a_dry_run_of_a_change_is_refused_as_the_change_is(call):
    _put(call, "nightly", DEFINITION)
    body = {**DEFINITION, "target": {"handler": "no.such"}}
    dry = _put(call, "nightly", body, dry_run="true")
    real = _put(call, "nightly", body)
    assert (dry["statusCode"], real["statusCode"]) == (422, 422)
    assert body_of(dry)["message"] == body_of(real)["message"]
    assert _jobs(call)[0]["version"] == 1


def test_a_job_with_every_field_set_is_unchanged_when_declared_again(call):
    # Given a job declared with every definition field given, nested ones included
    full = {
        "schedule": "cron(0 9 ? * MON-FRI *)",
        "timezone": "Europe/Paris",
        "target": {"http": {"url": "https://example.com/hook", "headers": {"X-A": "1"}}},
        "payload": {"report": "sales", "rows": [1, 2]},
        "priority": "high",
        "pool": "container",
        "timeout_seconds": 3600,
        "retry": {"max_attempts": 5, "base_seconds": 1.5, "max_seconds": 60},
        "misfire_policy": "run_all",
        "misfire_grace_seconds": 120,
        "max_catchup": 10,
        "overlap_policy": "skip",
        "dst_gap": "skip",
        "dst_overlap": "both",
        "jitter_seconds": 30,
        "description": "every field",
        "notify": {"webhook": "https://example.com/dead-letters"},
        "concurrency": {"limit": 2},
        "rate_limit": {"key": "partner-api", "per_second": 0.5, "burst": 2},
        "deadline_seconds": 900,
    }
    first = body_of(_put(call, "full", full))
    assert first["outcome"] == "created"
    # When the same definition is declared again
    again = body_of(_put(call, "full", full))
    # Then every stored form (defaults filled in, limits normalized, the HTTP method added) compares equal
    assert (again["outcome"], again["changed_fields"], again["job"]["version"]) == ("unchanged", [], 1)
    # And the definition the job answers with, declared back, is unchanged too
    stored = {k: first["job"][k] for k in full}
    back = body_of(_put(call, "full", stored))
    assert back["outcome"] == "unchanged", back["changed_fields"]
    # And a changed deadline (issue 32 §1) is a change like any other field's
    moved = body_of(_put(call, "full", {**full, "deadline_seconds": 1800}))
    assert (moved["outcome"], moved["changed_fields"]) == ("updated", ["deadline_seconds"])
    assert (moved["job"]["deadline_seconds"], moved["job"]["version"]) == (1800, 2)


def test_a_workflow_with_node_options_is_unchanged_when_declared_again(call):
    nodes = [
        {"id": "a", "target": {"handler": "demo.echo"}, "retry": {"max_attempts": 4}},
        {"id": "b", "target": {"handler": "demo.echo"}, "depends_on": ["a"], "trigger_rule": "all_done"},
    ]
    body = {**WORKFLOW, "nodes": nodes, "notify": {"webhook": "https://example.com/dl"}}
    assert body_of(_put(call, "wf", body, kind="workflows"))["outcome"] == "created"
    again = body_of(_put(call, "wf", body, kind="workflows"))
    assert (again["outcome"], again["workflow"]["version"]) == ("unchanged", 1)
