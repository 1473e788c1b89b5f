"""`jobsched workflows ...` against a contract server: the drawing of a definition and of a run."""

from __future__ import annotations

import json

from tests.cli.conftest import ContractServer

WORKFLOW = {
    "id": "wf-1",
    "name": "etl",
    "state": "active",
    "version": 2,
    "schedule": "0 3 * * *",
    "timezone": "UTC",
    "payload": {},
    "misfire_policy": "run_once",
    "misfire_grace_seconds": 60,
    "overlap_policy": "allow",
    "next_fire_times": ["2026-12-02T03:00:00.000Z"],
    "nodes": [
        {"id": "extract", "target": {"handler": "demo.echo"}, "depends_on": []},
        {"id": "clean", "target": {"handler": "demo.echo"}, "depends_on": ["extract"]},
        {"id": "audit", "target": {"handler": "demo.echo"}, "depends_on": ["extract"]},
        {"id": "load", "target": {"handler": "demo.echo"}, "depends_on": ["clean", "audit"]},
    ],
}
RUN = {
    "id": "wf-1.20261202T030000.000Z",
    "workflow_id": "wf-1",
    "state": "failed",
    "trigger": "schedule",
    "scheduled_at": "2026-12-02T03:00:00.000Z",
    "error": "node 'clean' failed: PermanentError: bad row (run wf-1.20261202T030000.000Z.nclean)",
    "nodes": [
        {
            "id": "extract",
            "state": "succeeded",
            "attempt": 1,
            "depends_on": [],
            "trigger_rule": "all_success",
        },
        {"id": "clean", "state": "failed", "attempt": 1, "error": "PermanentError: bad row"},
        {"id": "audit", "state": "succeeded", "attempt": 1},
        {"id": "load", "state": "upstream_failed", "attempt": 0, "error": "upstream_failed"},
    ],
    "retries": [],
    "drawing": "extract [succeeded]\n├── clean [failed]\n│   └── load [upstream_failed]  <- clean, audit\n"
    "└── audit [succeeded]\n    └── load (see above)",
}


def test_get_draws_the_definition(cli, cli_env: ContractServer) -> None:
    """Given a diamond workflow, When `workflows get` shows it, Then the DAG is drawn without states"""
    cli_env.respond("GET", "/workflows/wf-1", 200, WORKFLOW)
    result = cli("workflows", "get", "wf-1")
    assert result.code == 0, result.err
    assert result.out.rstrip().endswith(
        "extract\n├── clean\n│   └── load  <- clean, audit\n└── audit\n    └── load (see above)"
    )


def test_show_prints_the_drawing_with_node_states_and_the_node_table(cli, cli_env: ContractServer) -> None:
    """Given a failed workflow run, When `workflows show` prints it,
    Then the error, the drawing with states and one table row per node are shown"""
    cli_env.respond("GET", f"/workflow-runs/{RUN['id']}", 200, RUN)
    result = cli("workflows", "show", RUN["id"])
    assert result.code == 0, result.err
    assert "node 'clean' failed" in result.out
    assert "│   └── load [upstream_failed]  <- clean, audit" in result.out
    rows = [line.split() for line in result.out.splitlines() if line.startswith(("NODE", "load "))]
    assert rows[0][:2] == ["NODE", "STATE"] and rows[1][:2] == ["load", "upstream_failed"]


def test_show_watch_exits_1_for_a_failed_run(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", f"/workflow-runs/{RUN['id']}", 200, RUN)
    assert cli("workflows", "show", RUN["id"], "--watch", "--interval", "0").code == 1


def test_create_posts_the_file_and_flags_override(cli, cli_env: ContractServer, tmp_path) -> None:
    """Given a definition file, When `workflows create --file f --name other` runs,
    Then the POST body is the file with the name replaced"""
    path = tmp_path / "wf.json"
    path.write_text(json.dumps({"name": "etl", "schedule": "@daily", "nodes": WORKFLOW["nodes"]}))
    cli_env.respond("POST", "/workflows", 201, WORKFLOW)
    result = cli("workflows", "create", "--file", str(path), "--name", "other")
    assert result.code == 0, result.err
    body = cli_env.only("POST", "/workflows").json()
    assert body["name"] == "other" and [n["id"] for n in body["nodes"]] == [
        "extract",
        "clean",
        "audit",
        "load",
    ]


def test_run_sends_the_payload_and_idempotency_key(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/workflows/wf-1/runs", 201, {**RUN, "state": "queued"})
    cli("workflows", "run", "wf-1", "--payload", '{"day": 1}', "--idempotency-key", "k")
    request = cli_env.only("POST", "/workflows/wf-1/runs")
    assert request.json() == {"payload": {"day": 1}} and request.headers["idempotency-key"] == "k"
