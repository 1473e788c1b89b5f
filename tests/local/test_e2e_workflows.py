"""A DAG workflow end to end in the embedded mode (`jobsched dev`): a diamond with a failing branch,
its retry from the failed node, and a cancel, over HTTP, on the real clock."""

from __future__ import annotations

import pytest

from jobsched.cli.client import ApiClient
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess

pytestmark = pytest.mark.slow

TENANT, TOKEN = "e2e-wf", "tok-e2e-wf"
SHARED_TENANTS = {TENANT: TOKEN}
FAST = {"max_attempts": 1, "base_seconds": 0, "max_seconds": 0}


@pytest.fixture(scope="module")
def process(shared_process: EmbeddedProcess) -> EmbeddedProcess:
    """Given the embedded mode with the real functions and this module's tenant (shared with other
    modules: tests/local/shared_embedded.py)."""
    return shared_process


@pytest.fixture
def client(process: EmbeddedProcess) -> ApiClient:
    return process.client(TENANT)


def _ended(client: ApiClient, run_id: str) -> dict | None:
    run = client.request("GET", f"/workflow-runs/{run_id}")
    return run if run["state"] in ("succeeded", "failed", "cancelled") else None


def test_a_diamond_runs_each_node_once_and_a_retry_runs_only_the_failed_node(client: ApiClient) -> None:
    # Given a diamond whose right branch fails on its first attempt (demo.flaky, one attempt allowed)
    nodes = [
        {"id": "extract", "target": {"handler": "demo.echo"}, "payload": {"rows": 3}},
        {"id": "left", "target": {"handler": "demo.echo"}, "depends_on": ["extract"]},
        {
            "id": "right",
            "target": {"handler": "demo.flaky"},
            "payload": {"failures": 1},
            "depends_on": ["extract"],
            "retry": FAST,
        },
        {"id": "load", "target": {"handler": "demo.echo"}, "depends_on": ["left", "right"]},
    ]
    created = client.request(
        "POST", "/workflows", body={"name": "e2e diamond", "schedule": "@yearly", "nodes": nodes}
    )
    # When it is run now
    run = client.request("POST", f"/workflows/{created['id']}/runs", body={"payload": {"day": "d1"}})
    ended = wait_for(lambda: _ended(client, run["id"]), timeout=60, interval=0.3)
    # Then right failed, load is upstream_failed, the run failed naming right
    states = {n["id"]: n["state"] for n in ended["nodes"]}
    assert states == {
        "extract": "succeeded",
        "left": "succeeded",
        "right": "failed",
        "load": "upstream_failed",
    }
    assert ended["state"] == "failed" and ended["failed_node"] == "right"
    assert "load [upstream_failed]" in ended["drawing"]
    # When it is retried from the failed node
    client.request("POST", f"/workflow-runs/{run['id']}/retry", body={})
    done = wait_for(lambda: _ended(client, run["id"]), timeout=60, interval=0.3)
    # Then it succeeds; extract and left ran once, right twice (attempt 2), load once
    assert done["state"] == "succeeded", done
    attempts = {n["id"]: n["attempt"] for n in done["nodes"]}
    assert attempts == {"extract": 1, "left": 1, "right": 2, "load": 1}
    assert done["retries"][0]["failed"] == ["right"]
    load = client.get_run(f"{run['id']}.nload")
    assert load["output"]["workflow_input"] == {"day": "d1"}
    assert load["output"]["upstream"]["left"]["output"]["upstream"]["extract"]["output"]["rows"] == 3


def test_cancelling_a_running_workflow_run_stops_its_running_node(client: ApiClient) -> None:
    # Given a -> b where a sleeps 30 s
    nodes = [
        {"id": "a", "target": {"handler": "demo.sleep"}, "payload": {"seconds": 30}},
        {"id": "b", "target": {"handler": "demo.echo"}, "depends_on": ["a"]},
    ]
    created = client.request(
        "POST", "/workflows", body={"name": "e2e cancel", "schedule": "@yearly", "nodes": nodes}
    )
    run = client.request("POST", f"/workflows/{created['id']}/runs", body={})
    wait_for(
        lambda: client.request("GET", f"/workflow-runs/{run['id']}")["nodes"][0]["state"] == "running",
        timeout=30,
        interval=0.2,
    )
    # When the workflow run is cancelled
    client.request("POST", f"/workflow-runs/{run['id']}/cancel", body={})
    # Then a sees the flag and ends, b is cancelled, the workflow run is cancelled
    ended = wait_for(lambda: _ended(client, run["id"]), timeout=20, interval=0.2)
    assert ended["state"] == "cancelled"
    assert [n["state"] for n in ended["nodes"]] == ["cancelled", "cancelled"]
