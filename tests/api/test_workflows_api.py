"""``/workflows`` and ``/workflow-runs`` through the real resolver over the in-memory fakes: create, read,
list, change, run, node states, the drawing, cancel, retry, 4xx for bad definitions, tenant isolation."""

from __future__ import annotations

import json

import pytest

from tests.api.events import ACME, GLOBEX, body_of
from tests.aws.workflow_kit import WorkflowKit

NO_BACKOFF = {"max_attempts": 1, "base_seconds": 0, "max_seconds": 0}
WORKFLOW = {
    "name": "nightly etl",
    "schedule": "0 3 * * *",
    "timezone": "Europe/Berlin",
    "nodes": [
        {"id": "extract", "target": {"handler": "demo.echo"}, "payload": {"table": "orders"}},
        {"id": "transform", "target": {"handler": "demo.echo"}, "depends_on": ["extract"]},
        {"id": "load", "target": {"handler": "demo.echo"}, "depends_on": ["transform"]},
    ],
}


@pytest.fixture
def kit(aws, clock) -> WorkflowKit:
    return WorkflowKit(aws, clock)


def _create(call, body=None, headers=ACME) -> dict:
    response = call("POST", "/workflows", body=body or WORKFLOW, headers=headers)
    assert response["statusCode"] == 201, response["body"]
    assert response["headers"]["Location"].startswith("/workflows/")
    return json.loads(response["body"])


def test_create_read_list_and_change_a_workflow(call):
    """Given a valid workflow
    When it is created, read, listed and changed with If-Match
    Then it answers with its nodes in order, a version, and the change applies."""
    created = _create(call)
    assert [n["id"] for n in created["nodes"]] == ["extract", "transform", "load"]
    assert created["nodes"][1]["trigger_rule"] == "all_success"
    assert created["version"] == 1 and created["next_fire_times"]
    read = call("GET", f"/workflows/{created['id']}", headers=ACME)
    assert read["statusCode"] == 200 and read["headers"]["ETag"] == '"1"'
    listed = body_of(call("GET", "/workflows", headers=ACME))
    assert [w["id"] for w in listed["items"]] == [created["id"]]
    nodes = [*WORKFLOW["nodes"], {"id": "report", "target": {"handler": "demo.echo"}, "depends_on": ["load"]}]
    changed = call(
        "PATCH", f"/workflows/{created['id']}", body={"nodes": nodes}, headers={**ACME, "If-Match": "1"}
    )
    assert changed["statusCode"] == 200, changed["body"]
    assert [n["id"] for n in body_of(changed)["nodes"]][-1] == "report"


@pytest.mark.parametrize(
    ("nodes", "fragment"),
    [
        ([{"id": "a", "target": {"handler": "demo.echo"}, "depends_on": ["nope"]}], "unknown node 'nope'"),
        (
            [
                {"id": "a", "target": {"handler": "demo.echo"}, "depends_on": ["b"]},
                {"id": "b", "target": {"handler": "demo.echo"}, "depends_on": ["a"]},
            ],
            "cycle: ",
        ),
        (
            [
                {"id": "a", "target": {"handler": "demo.echo"}},
                {"id": "a", "target": {"handler": "demo.echo"}},
            ],
            "duplicate node id 'a'",
        ),
        ([{"id": "a", "target": {"handler": "no.such"}}], "unknown handler 'no.such'"),
        ([{"id": f"n{i}", "target": {"handler": "demo.echo"}} for i in range(101)], "nodes"),
        ([], "nodes"),
    ],
)
def test_bad_definitions_answer_422_and_store_nothing(call, nodes, fragment):
    """Given a definition with an unknown parent, a cycle, a duplicate id, an unknown handler, too many
    or no nodes
    When it is posted
    Then the answer is a 4xx naming the problem, and no workflow exists."""
    response = call("POST", "/workflows", body={**WORKFLOW, "nodes": nodes}, headers=ACME)
    assert 400 <= response["statusCode"] < 500, response["body"]
    assert fragment in body_of(response)["message"]
    assert body_of(call("GET", "/workflows", headers=ACME))["items"] == []


def test_a_workflow_run_shows_node_states_and_the_drawing(call, kit):
    """Given a created workflow
    When it is run now and its messages are worked off
    Then the workflow run answers succeeded with every node succeeded, their run ids, and a drawing."""
    created = _create(call)
    started = call("POST", f"/workflows/{created['id']}/runs", body={"payload": {"day": 1}}, headers=ACME)
    assert started["statusCode"] == 201, started["body"]
    run = body_of(started)
    assert run["state"] == "queued" and {n["state"] for n in run["nodes"]} == {"pending"}
    assert [n["phases"] for n in run["nodes"]] == [[], [], []]  # pending: no node run yet
    kit.drain()
    view = body_of(call("GET", f"/workflow-runs/{run['id']}", headers=ACME))
    assert view["state"] == "succeeded"
    assert [(n["id"], n["state"]) for n in view["nodes"]] == [
        ("extract", "succeeded"),
        ("transform", "succeeded"),
        ("load", "succeeded"),
    ]
    assert view["nodes"][0]["run_id"] == f"{run['id']}.nextract"
    assert view["nodes"][1]["output"]["upstream"]["extract"]["output"]["table"] == "orders"
    assert view["drawing"] == ("extract [succeeded]\n└── transform [succeeded]\n    └── load [succeeded]")
    # each node's phases (decision 0064): here one attempt each, run at the kit's fixed instant
    for n in view["nodes"]:
        assert n["phases"] == [
            {"phase": "running", "start": n["started_at"], "end": n["finished_at"], "attempt": 1}
        ]
    runs = body_of(call("GET", f"/workflows/{created['id']}/runs", headers=ACME))
    assert [r["id"] for r in runs["items"]] == [run["id"]]
    node_run = body_of(call("GET", f"/runs/{run['id']}.nload", headers=ACME))
    assert node_run["state"] == "succeeded"


def test_a_page_of_workflow_runs_may_be_short_and_its_cursor_leads_on(call, kit):
    """Given a workflow of three nodes with one finished run (so three node runs beside it)
    When its runs are listed one record per page
    Then the first pages hold no item but a next_cursor, and following it reaches the run, then
    the list ends (docs/api.md, GET /workflows/{id}/runs)."""
    created = _create(call)
    run = body_of(call("POST", f"/workflows/{created['id']}/runs", headers=ACME))
    kit.drain()
    pages, cursor = [], None
    while True:
        query = {"limit": "1", **({"cursor": cursor} if cursor else {})}
        page = body_of(call("GET", f"/workflows/{created['id']}/runs", headers=ACME, query=query))
        pages.append([r["id"] for r in page["items"]])
        cursor = page["next_cursor"]
        if not cursor:
            break
        assert len(pages) < 10, "the cursor never ended"
    assert pages[0] == [] and [i for p in pages for i in p] == [run["id"]]


def test_a_failed_workflow_run_is_retried_from_its_failed_node(call, kit):
    """Given a workflow whose middle node fails permanently
    When it runs, then is retried over the API (the node still fails)
    Then the run is failed naming the node, load is upstream_failed, and the retry is recorded."""
    body = {**WORKFLOW}
    body["nodes"] = [
        WORKFLOW["nodes"][0],
        {
            **WORKFLOW["nodes"][1],
            "target": {"handler": "demo.fail"},
            "payload": {"kind": "permanent"},
            "retry": NO_BACKOFF,
        },
        WORKFLOW["nodes"][2],
    ]
    created = _create(call, body)
    run = body_of(call("POST", f"/workflows/{created['id']}/runs", headers=ACME))
    kit.drain()
    view = body_of(call("GET", f"/workflow-runs/{run['id']}", headers=ACME))
    assert view["state"] == "failed" and view["failed_node"] == "transform"
    assert "node 'transform' failed" in view["error"]
    assert [n["state"] for n in view["nodes"]] == ["succeeded", "failed", "upstream_failed"]
    assert "load [upstream_failed]" in view["drawing"]
    retried = call("POST", f"/workflow-runs/{run['id']}/retry", headers=ACME)
    assert retried["statusCode"] == 200, retried["body"]
    assert body_of(retried)["retries"][0]["failed"] == ["transform"]
    kit.drain()
    again = body_of(call("GET", f"/workflow-runs/{run['id']}", headers=ACME))
    assert again["state"] == "failed" and again["nodes"][0]["attempt"] == 1
    assert call("POST", f"/workflow-runs/{run['id']}/cancel", headers=ACME)["statusCode"] == 409


def test_another_tenant_gets_404_on_every_workflow_route(call, kit):
    """Given acme's workflow and workflow run
    When globex uses every route on them
    Then each answers 404 and acme's objects are unchanged."""
    created = _create(call)
    run = body_of(call("POST", f"/workflows/{created['id']}/runs", headers=ACME))
    routes = [
        ("GET", f"/workflows/{created['id']}", None, {}),
        ("PATCH", f"/workflows/{created['id']}", {"name": "x"}, {"If-Match": "1"}),
        ("DELETE", f"/workflows/{created['id']}", None, {"If-Match": "1"}),
        ("POST", f"/workflows/{created['id']}/pause", {}, {}),
        ("POST", f"/workflows/{created['id']}/resume", {}, {}),
        ("POST", f"/workflows/{created['id']}/runs", {}, {}),
        ("GET", f"/workflows/{created['id']}/runs", None, {}),
        (
            "POST",
            f"/workflows/{created['id']}/backfill",
            {"from": "2026-03-01T00:00:00Z", "to": "2026-03-02T00:00:00Z"},
            {},
        ),
        ("GET", f"/workflow-runs/{run['id']}", None, {}),
        ("POST", f"/workflow-runs/{run['id']}/cancel", {}, {}),
        ("POST", f"/workflow-runs/{run['id']}/retry", {}, {}),
    ]
    for method, path, body, headers in routes:
        response = call(method, path, body=body, headers={**GLOBEX, **headers})
        assert response["statusCode"] == 404, (method, path, response["body"])
    assert body_of(call("GET", f"/workflow-runs/{run['id']}", headers=ACME))["state"] == "queued"


def test_a_plain_job_and_a_node_run_are_not_workflows(call, create_job, kit):
    """Given a plain job and a node run
    When read through the workflow routes
    Then both answer 404."""
    job = create_job(ACME)
    assert call("GET", f"/workflows/{job['id']}", headers=ACME)["statusCode"] == 404
    created = _create(call)
    run = body_of(call("POST", f"/workflows/{created['id']}/runs", headers=ACME))
    kit.drain()
    assert call("GET", f"/workflow-runs/{run['id']}.nextract", headers=ACME)["statusCode"] == 404
    trigger = call("POST", f"/jobs/{job['id']}/trigger", headers=ACME)
    assert call("GET", f"/workflow-runs/{body_of(trigger)['id']}", headers=ACME)["statusCode"] == 404


def test_the_openapi_document_lists_the_workflow_routes(call):
    """Given the API
    When its OpenAPI document is read
    Then every workflow route is in it."""
    paths = body_of(call("GET", "/openapi.json"))["paths"]
    for path in (
        "/workflows",
        "/workflows/{workflow_id}",
        "/workflows/{workflow_id}/runs",
        "/workflows/{workflow_id}/backfill",
        "/workflows/{workflow_id}/pause",
        "/workflows/{workflow_id}/resume",
        "/workflow-runs/{run_id}",
        "/workflow-runs/{run_id}/cancel",
        "/workflow-runs/{run_id}/retry",
    ):
        assert path in paths, path
