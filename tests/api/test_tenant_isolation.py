"""Another tenant's job, run or dead letter answers 404 on every route, and stays unchanged."""

from __future__ import annotations

import pytest

from tests.api.events import ACME, GLOBEX, body_of

FAILING = {"target": {"handler": "demo.fail"}, "payload": {"kind": "permanent"}}


@pytest.fixture
def acme_objects(call, create_job, work_queue) -> dict[str, str]:
    """Acme's job and its dead-lettered run."""
    job = create_job(ACME, **FAILING)
    run = body_of(call("POST", f"/jobs/{job['id']}/trigger", headers=ACME))
    assert work_queue() == ["dead_lettered"]
    return {"job": job["id"], "run": run["id"]}


ROUTES = [
    ("GET", "/jobs/{job}", None, {}),
    ("PATCH", "/jobs/{job}", {"name": "taken"}, {"If-Match": "1"}),
    ("DELETE", "/jobs/{job}", None, {"If-Match": "1"}),
    ("POST", "/jobs/{job}/pause", {"note": "x"}, {}),
    ("POST", "/jobs/{job}/resume", {}, {}),
    ("POST", "/jobs/{job}/trigger", {}, {}),
    ("POST", "/jobs/{job}/backfill", {"from": "2026-03-01T00:00:00Z", "to": "2026-03-02T00:00:00Z"}, {}),
    ("GET", "/jobs/{job}/runs", None, {}),
    ("GET", "/runs/{run}", None, {}),
    ("POST", "/runs/{run}/cancel", {}, {}),
    ("POST", "/runs/{run}/retry", {}, {}),
    ("POST", "/dead-letters/{run}/replay", {}, {}),
    ("DELETE", "/dead-letters/{run}", None, {}),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "headers"), ROUTES, ids=[f"{m} {p}" for m, p, _, _ in ROUTES]
)
def test_another_tenants_object_is_not_found(call, acme_objects, method, path, body, headers):
    # Given acme's job and dead-lettered run
    # When globex calls the route with their ids
    response = call(method, path.format(**acme_objects), body=body, headers={**GLOBEX, **headers})
    # Then 404, exactly like a missing object
    assert response["statusCode"] == 404, response["body"]
    assert body_of(response)["error"] == "not_found"


def test_runs_filtered_by_another_tenants_job_list_nothing(call, acme_objects):
    response = call("GET", "/runs", query={"job_id": acme_objects["job"]}, headers=GLOBEX)
    assert response["statusCode"] == 200
    assert body_of(response) == {"items": [], "next_cursor": None}


def test_lists_hold_only_the_callers_objects(call, acme_objects):
    for path in ("/jobs", "/runs", "/dead-letters"):
        assert body_of(call("GET", path, headers=GLOBEX))["items"] == [], path
        assert body_of(call("GET", path, headers=ACME))["items"] != [], path


def test_replay_by_filter_touches_only_the_callers_dead_letters(call, acme_objects):
    response = call("POST", "/dead-letters/replay", body={"job_id": acme_objects["job"]}, headers=GLOBEX)
    assert body_of(response)["replayed"] == 0
    assert len(body_of(call("GET", "/dead-letters", headers=ACME))["items"]) == 1


def test_another_tenants_attempts_changed_nothing(call, acme_objects):
    for method, path, body, headers in ROUTES:
        call(method, path.format(**acme_objects), body=body, headers={**GLOBEX, **headers})
    job = body_of(call("GET", f"/jobs/{acme_objects['job']}", headers=ACME))
    run = body_of(call("GET", f"/runs/{acme_objects['run']}", headers=ACME))
    assert (job["version"], job["state"], job["name"]) == (1, "active", "nightly report")
    assert run["state"] == "failed"
    assert len(body_of(call("GET", f"/jobs/{acme_objects['job']}/runs", headers=ACME))["items"]) == 1


def test_a_cursor_from_another_tenant_is_400(call, create_job):
    for i in range(2):
        create_job(ACME, name=f"j{i}")
    cursor = body_of(call("GET", "/jobs", query={"limit": "1"}, headers=ACME))["next_cursor"]
    response = call("GET", "/jobs", query={"limit": "1", "cursor": cursor}, headers=GLOBEX)
    assert response["statusCode"] == 400


#: Bodies that pass the models, so a route reaches its tenant check (others send ``{}``).
BODIES = {
    ("patch", "/jobs/{job_id}"): {"name": "taken"},
    ("post", "/jobs/{job_id}/backfill"): {"from": "2026-03-01T00:00:00Z", "to": "2026-03-02T00:00:00Z"},
}


def _object_routes(call) -> list[tuple[str, str]]:
    """Every operation of the OpenAPI document that addresses one job or run by its id."""
    document = body_of(call("GET", "/openapi.json"))
    return sorted(
        (method, path)
        for path, item in document["paths"].items()
        for method in item
        if "{job_id}" in path or "{run_id}" in path
    )


def test_every_object_route_of_the_document_answers_404_for_another_tenant(call, acme_objects):
    """Given acme's job and dead-lettered run / When globex calls every route of the OpenAPI document
    that takes a job or run id (so a new route is covered without editing this test) / Then 404."""
    routes = _object_routes(call)
    assert len(routes) >= len(ROUTES) + 1  # GET /runs/{run_id}/logs is in the document too
    for method, path in routes:
        target = path.replace("{job_id}", acme_objects["job"]).replace("{run_id}", acme_objects["run"])
        body = BODIES.get((method, path), {}) if method in ("post", "put", "patch") else None
        response = call(method.upper(), target, body=body, headers={**GLOBEX, "If-Match": "1"})
        assert response["statusCode"] == 404, (method, path, response["body"])
        assert body_of(response)["error"] == "not_found"
