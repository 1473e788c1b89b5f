"""End to end through the real embedded mode: tenant isolation over HTTP.

Two tenants, ``alpha`` and ``beta`` (``iso-alpha`` and ``iso-beta``: the embedded mode is shared with
other modules, tests/local/shared_embedded.py), each with its own bearer token. ``alpha`` owns a job,
a run and a dead letter; ``beta`` addresses each of them by id on every route and gets 404 (exactly
like an id that does not exist), finds none of them in its lists, and changes nothing of alpha's.
(``tests/cli/test_real_api.py`` covers ``jobs get`` of another tenant's job through the CLI.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from jobsched.cli.client import ApiClient, ApiError
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import VALIDATE_HANDLER, EmbeddedProcess, job, run_state

pytestmark = pytest.mark.slow

ALPHA, BETA = "iso-alpha", "iso-beta"
SHARED_TENANTS = {ALPHA: "tok-e2e-iso-alpha", BETA: "tok-e2e-iso-beta"}
YEAR = {"from": "2026-01-01T00:00:00Z", "to": "2026-12-31T00:00:00Z"}


@dataclass
class World:
    alpha: ApiClient
    beta: ApiClient
    job: dict[str, Any]  # alpha's job, as created
    run: dict[str, Any]  # alpha's failed run: a dead letter
    beta_job: dict[str, Any]


@pytest.fixture(scope="module")
def world(shared_process: EmbeddedProcess) -> World:
    """Given alpha's job with a failed run (a dead letter), and beta's own job."""
    alpha, beta = shared_process.client(ALPHA), shared_process.client(BETA)
    created = alpha.create_job(job("e2e.alpha", "@yearly", VALIDATE_HANDLER, payload={"valid": False}))
    run_id = alpha.trigger_job(created["id"])["id"]
    failed = wait_for(lambda: run_state(alpha, run_id, "failed"), timeout=60, interval=0.3)
    beta_job = beta.create_job(job("e2e.beta", "@yearly", "demo.echo"))
    return World(alpha, beta, alpha.get_job(created["id"]), failed, beta_job)


def _routes(world: World) -> list[tuple[str, str, Any, dict[str, str] | None]]:
    """Every route that names one of alpha's resources: (method, path, body, headers)."""
    job_id, run_id, version = world.job["id"], world.run["id"], str(world.job["version"])
    return [
        ("GET", f"/jobs/{job_id}", None, None),
        ("PATCH", f"/jobs/{job_id}", {"description": "beta was here"}, {"If-Match": version}),
        ("DELETE", f"/jobs/{job_id}", None, {"If-Match": version}),
        ("POST", f"/jobs/{job_id}/pause", {}, None),
        ("POST", f"/jobs/{job_id}/resume", {}, None),
        ("POST", f"/jobs/{job_id}/trigger", {}, None),
        (
            "POST",
            f"/jobs/{job_id}/backfill",
            {"from": "2026-01-01T00:00:00Z", "to": "2027-01-01T00:00:00Z"},
            None,
        ),
        ("GET", f"/jobs/{job_id}/runs", None, None),
        ("GET", f"/jobs/{job_id}/history", None, None),
        ("GET", f"/runs/{run_id}", None, None),
        ("POST", f"/runs/{run_id}/cancel", {}, None),
        ("POST", f"/runs/{run_id}/retry", {}, None),
        ("POST", f"/dead-letters/{run_id}/replay", {"payload": {"valid": True}}, None),
        ("DELETE", f"/dead-letters/{run_id}", None, None),
    ]


def test_every_route_naming_another_tenants_resource_answers_404(world: World) -> None:
    # When beta calls each route with alpha's ids
    answers = {}
    for method, path, body, headers in _routes(world):
        try:
            world.beta.request(method, path, body=body, headers=headers)
            answers[(method, path)] = "answered"
        except ApiError as exc:
            answers[(method, path)] = f"{exc.status} {exc.code}"
    # Then each answers 404 not_found
    assert answers == {(method, path): "404 not_found" for method, path, _, _ in _routes(world)}


def test_the_404_is_the_same_as_for_an_id_that_does_not_exist(world: World) -> None:
    # When beta asks for alpha's run and for a run that does not exist
    def error(run_id: str) -> tuple[int, str]:
        with pytest.raises(ApiError) as caught:
            world.beta.get_run(run_id)
        return caught.value.status, caught.value.code

    # Then both answer alike: nothing tells beta that alpha's exists
    assert error(world.run["id"]) == error(world.run["id"][:-6] + "00.000Z") == (404, "not_found")


def test_lists_show_only_the_callers_own(world: World) -> None:
    job_id, run_id = world.job["id"], world.run["id"]
    # Then beta's job list holds only its own job
    assert [j["id"] for j in world.beta.list_all("/jobs")] == [world.beta_job["id"]]
    # And beta's runs and dead letters, unfiltered or filtered by alpha's job, hold none of alpha's
    assert run_id not in {r["id"] for r in world.beta.list_all("/runs")}
    assert world.beta.list_all("/runs", {"job_id": job_id}) == []
    assert world.beta.list_all("/dead-letters") == []
    assert world.beta.list_all("/dead-letters", {"job_id": job_id}) == []
    # And a bulk replay by alpha's job id replays nothing
    assert world.beta.replay_dead_letters({"job_id": job_id})["replayed"] == 0
    # While alpha sees its own
    assert [d["run_id"] for d in world.alpha.list_all("/dead-letters")] == [run_id]
    assert [r["id"] for r in world.alpha.list_all("/runs", {"job_id": job_id})] == [run_id]


def test_another_tenants_calls_change_nothing(world: World) -> None:
    # When beta has tried every route on alpha's resources
    for method, path, body, headers in _routes(world):
        with pytest.raises(ApiError):
            world.beta.request(method, path, body=body, headers=headers)
    world.beta.replay_dead_letters({"job_id": world.job["id"]})
    # Then alpha's job is as it was, its run still failed with its one attempt, still a dead letter
    after = world.alpha.get_job(world.job["id"])
    assert (after["version"], after["state"], after["description"]) == (
        world.job["version"],
        world.job["state"],
        world.job["description"],
    )
    run = world.alpha.get_run(world.run["id"])
    assert (run["state"], len(run["attempts"]), run["replays"]) == ("failed", 1, [])
    assert [d["run_id"] for d in world.alpha.list_all("/dead-letters")] == [world.run["id"]]
    assert [r["id"] for r in world.alpha.list_all("/runs", {"job_id": world.job["id"]})] == [world.run["id"]]
