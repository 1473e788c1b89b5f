"""The CLI covers the API (issue 11): update, backfill, trigger/retry payloads, admin, health, and the
feedback of pause and cancel — against a contract server, checking the requests sent and the output."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli.conftest import ContractServer, job_body, run_body

RUN_ID = "job-0001.20261201T090000Z"

#: Every operation of the API (method, path template) -> a CLI command that sends it. The slow test
#: in test_docs_run.py checks that this covers every operation the real API's OpenAPI document lists.
CLI_FOR_OPERATION: dict[tuple[str, str], tuple[str, ...]] = {
    ("GET", "/health"): ("health",),
    ("POST", "/jobs"): ("jobs", "create", "--name", "n", "--schedule", "@daily", "--handler", "demo.echo"),
    ("GET", "/jobs"): ("jobs", "list"),
    ("GET", "/jobs/{job_id}"): ("jobs", "get", "job-0001"),
    ("PATCH", "/jobs/{job_id}"): ("jobs", "update", "job-0001", "--schedule", "@hourly", "--if-match", "1"),
    ("DELETE", "/jobs/{job_id}"): ("jobs", "delete", "job-0001", "--if-match", "1"),
    ("POST", "/jobs/{job_id}/pause"): ("jobs", "pause", "job-0001"),
    ("POST", "/jobs/{job_id}/resume"): ("jobs", "resume", "job-0001"),
    ("POST", "/jobs/{job_id}/trigger"): ("jobs", "trigger", "job-0001"),
    ("POST", "/jobs/{job_id}/backfill"): ("jobs", "backfill", "job-0001", "--from", "2026-12-01T00:00:00Z",
                                          "--to", "2026-12-01T01:00:00Z"),
    ("GET", "/jobs/{job_id}/backfills/{backfill_id}"): ("jobs", "backfill-status", "job-0001",
                                                        "b" + "0" * 24),
    ("GET", "/jobs/{job_id}/runs"): ("jobs", "runs", "job-0001"),
    ("GET", "/jobs/{job_id}/history"): ("jobs", "history", "job-0001"),
    ("GET", "/runs"): ("runs", "list"),
    ("GET", "/runs/{run_id}"): ("runs", "get", RUN_ID),
    ("POST", "/runs/{run_id}/cancel"): ("runs", "cancel", RUN_ID),
    ("POST", "/runs/{run_id}/retry"): ("runs", "retry", RUN_ID),
    ("GET", "/runs/{run_id}/logs"): ("runs", "logs", RUN_ID),
    ("GET", "/dead-letters"): ("dlq", "list"),
    ("POST", "/dead-letters/replay"): ("dlq", "replay", "--job", "job-0001"),
    ("POST", "/dead-letters/{run_id}/replay"): ("dlq", "replay", RUN_ID),
    ("DELETE", "/dead-letters/{run_id}"): ("dlq", "discard", RUN_ID),
    ("GET", "/settings/notify"): ("settings", "notify", "get"),
    ("PUT", "/settings/notify"): ("settings", "notify", "set", "--webhook", "https://hooks.example.com/x"),
    ("GET", "/admin/principals"): ("admin", "principals", "list"),
    ("PUT", "/admin/principals"): ("admin", "principals", "map", "arn:aws:iam::123456789012:role/r", "acme"),
    ("DELETE", "/admin/principals"): ("admin", "principals", "unmap", "arn:aws:iam::123456789012:role/r"),
    ("GET", "/limits"): ("limits",),
    ("GET", "/usage"): ("usage",),
    ("GET", "/forecast"): ("forecast",),
    ("GET", "/stats"): ("stats",),
    ("GET", "/stats/queues"): ("stats", "--queues"),
    ("GET", "/admin/tenants/limits"): ("admin", "limits", "list"),
    ("GET", "/admin/tenants/{tenant}/limits"): ("admin", "limits", "get", "acme"),
    ("PUT", "/admin/tenants/{tenant}/limits"): ("admin", "limits", "set", "acme", "--max-running", "5"),
    ("DELETE", "/admin/tenants/{tenant}/limits"): ("admin", "limits", "clear", "acme"),
    ("GET", "/budget"): ("budget",),
    ("GET", "/admin/tenants/budgets"): ("admin", "budget", "list"),
    ("GET", "/admin/tenants/{tenant}/budget"): ("admin", "budget", "get", "acme"),
    ("PUT", "/admin/tenants/{tenant}/budget"): ("admin", "budget", "set", "acme", "50"),
    ("DELETE", "/admin/tenants/{tenant}/budget"): ("admin", "budget", "clear", "acme"),
    ("POST", "/workflows"): ("workflows", "create", "--file", "@WORKFLOW_FILE"),
    ("GET", "/workflows"): ("workflows", "list"),
    ("GET", "/workflows/{workflow_id}"): ("workflows", "get", "job-0001"),
    ("PATCH", "/workflows/{workflow_id}"): ("workflows", "update", "job-0001", "--name", "n",
                                             "--if-match", "1"),
    ("DELETE", "/workflows/{workflow_id}"): ("workflows", "delete", "job-0001", "--if-match", "1"),
    ("POST", "/workflows/{workflow_id}/pause"): ("workflows", "pause", "job-0001"),
    ("POST", "/workflows/{workflow_id}/resume"): ("workflows", "resume", "job-0001"),
    ("POST", "/workflows/{workflow_id}/runs"): ("workflows", "run", "job-0001"),
    ("GET", "/workflows/{workflow_id}/runs"): ("workflows", "runs", "job-0001"),
    ("POST", "/workflows/{workflow_id}/backfill"): ("workflows", "backfill", "job-0001", "--from",
                                                    "2026-12-01T00:00:00Z", "--to", "2026-12-01T01:00:00Z"),
    ("GET", "/workflow-runs/{run_id}"): ("workflows", "show", RUN_ID),
    ("POST", "/workflow-runs/{run_id}/cancel"): ("workflows", "cancel", RUN_ID),
    ("POST", "/workflow-runs/{run_id}/retry"): ("workflows", "retry", RUN_ID),
    ("GET", "/handlers"): ("handlers",),
    ("POST", "/handlers/{name}/versions/{version}/drain"): ("handlers", "drain", "demo.echo", "1"),
    ("DELETE", "/handlers/{name}/versions/{version}/drain"): ("handlers", "undrain", "demo.echo", "1"),
    ("GET", "/handlers/deploy-checks"): ("handlers", "deploy-checks"),
    ("POST", "/handlers/deploy-checks"): ("handlers", "deploy-checks", "record", "--code-version", "abc"),
    ("PUT", "/jobs/by-name/{name}"): ("apply", "-f", "@APPLY_FILE"),
    ("PUT", "/workflows/by-name/{name}"): ("apply", "-f", "@APPLY_FILE"),
    ("GET", "/declared"): ("apply", "-f", "@APPLY_FILE"),
}  # fmt: skip
#: `jobsched apply`'s file for the operations above: one job and one workflow, named as _concrete names.
APPLY_FILE = (
    "jobs:\n  - {name: demo.echo, schedule: '@daily', target: {handler: demo.echo}}\n"
    "workflows:\n  - name: demo.echo.wf\n    schedule: '@daily'\n"
    "    nodes: [{id: a, target: {handler: demo.echo}}]\n"
)
#: Operations a command answers without the server, from the same code the route calls.
LOCAL_EQUIVALENT = {("GET", "/schedules/preview"): "jobsched preview (jobsched.core.preview, in-process)"}


def _concrete(path: str) -> str:
    return (
        path.replace("{job_id}", "job-0001")
        .replace("{workflow_id}", "job-0001")
        .replace("{run_id}", RUN_ID)
        .replace("{tenant}", "acme")
        .replace("{backfill_id}", "b" + "0" * 24)
        .replace("{name}", "demo.echo")
        .replace("{version}", "1")
    )


@pytest.mark.parametrize("operation", sorted(CLI_FOR_OPERATION), ids=lambda op: f"{op[0]} {op[1]}")
def test_each_api_operation_has_a_cli_command_that_sends_it(
    cli, cli_env: ContractServer, operation, tmp_path
) -> None:
    """Given a contract server, When the CLI command for an operation runs, Then it sends that request"""
    method, template = operation
    path = _concrete(template)
    cli_env.respond("GET", "/jobs/job-0001", 200, job_body())
    argv = CLI_FOR_OPERATION[operation]
    if "@APPLY_FILE" in argv:
        declarations = tmp_path / "jobs.yaml"
        declarations.write_text(APPLY_FILE)
        argv = tuple(str(declarations) if a == "@APPLY_FILE" else a for a in argv)
        declared = {"outcome": "unchanged", "changed_fields": [], "dry_run": False, "job": job_body()}
        cli_env.respond("PUT", "/jobs/by-name/demo.echo", 200, {"name": "demo.echo", **declared})
        cli_env.respond("PUT", "/workflows/by-name/demo.echo.wf", 200, {"name": "demo.echo.wf", **declared})
        cli_env.respond("GET", "/declared", 200, {"items": []})
        path = path.replace("/workflows/by-name/demo.echo", "/workflows/by-name/demo.echo.wf")
    else:
        cli_env.respond(method, path, 200, {"items": [], "next_cursor": None, **job_body()})
    if "@WORKFLOW_FILE" in argv:
        definition = tmp_path / "wf.json"
        definition.write_text(json.dumps({"name": "n", "schedule": "@daily", "nodes": [{"id": "a"}]}))
        argv = tuple(str(definition) if a == "@WORKFLOW_FILE" else a for a in argv)
    result = cli(*argv)
    assert any(r.method == method and r.path == path for r in cli_env.requests), cli_env.summary()
    assert result.code == 0, result.err


def test_update_reads_the_version_and_sends_a_patch_with_if_match(cli, cli_env: ContractServer) -> None:
    """Given a job at version 4, When `jobs update` changes its schedule and one retry setting,
    Then it PATCHes only those fields with If-Match: 4, the retry merged into the current settings"""
    cli_env.respond("GET", "/jobs/job-0001", 200, job_body(version=4))
    cli_env.respond("PATCH", "/jobs/job-0001", 200, job_body(version=5, schedule="@hourly"))
    result = cli("jobs", "update", "job-0001", "--schedule", "@hourly", "--retry-max-attempts", "7")
    patch = cli_env.only("PATCH", "/jobs/job-0001")
    assert patch.headers["if-match"] == "4"
    assert patch.json() == {
        "schedule": "@hourly",
        "retry": {"max_attempts": 7, "base_seconds": 1, "max_seconds": 60},
    }
    assert result.code == 0
    assert "version:" in result.out and "5" in result.out


def test_update_re_reads_and_re_applies_when_the_job_changed_meanwhile(cli, cli_env: ContractServer) -> None:
    """Given a job changed by someone else between the read and the PATCH (412 once)
    When `jobs update` runs, Then it reads the new version and succeeds with it"""
    cli_env.respond("GET", "/jobs/job-0001", 200, job_body(version=4))
    cli_env.respond("GET", "/jobs/job-0001", 200, job_body(version=5))
    cli_env.respond("PATCH", "/jobs/job-0001", 412, {"error": "precondition_failed", "message": "version 5"})
    cli_env.respond("PATCH", "/jobs/job-0001", 200, job_body(version=6, name="x"))
    result = cli("jobs", "update", "job-0001", "--name", "x")
    patches = [r for r in cli_env.requests if r.method == "PATCH"]
    assert [p.headers["if-match"] for p in patches] == ["4", "5"]
    assert result.code == 0


def test_update_with_if_match_sends_that_version_once(cli, cli_env: ContractServer) -> None:
    cli_env.respond("PATCH", "/jobs/job-0001", 412, {"error": "precondition_failed", "message": "version 5"})
    result = cli("jobs", "update", "job-0001", "--name", "x", "--if-match", "4")
    assert [r.method for r in cli_env.requests] == ["PATCH"]
    assert (result.code, result.err.strip()) == (1, "error: precondition_failed: version 5")


def test_update_without_changes_is_a_usage_error(cli, cli_env: ContractServer) -> None:
    result = cli("jobs", "update", "job-0001")
    assert result.code == 2
    assert result.err.startswith("error: usage: nothing to change")
    assert cli_env.requests == []


def test_backfill_posts_the_window_and_lists_the_runs(cli, cli_env: ContractServer) -> None:
    runs = [run_body(id=f"job-0001.2026120{i}T000000Z", state="queued") for i in (1, 2)]
    cli_env.respond("POST", "/jobs/job-0001/backfill", 201, {"runs": runs})
    result = cli(
        "jobs", "backfill", "job-0001", "--from", "2026-12-01T00:00:00Z", "--to", "2026-12-02T00:00:00Z"
    )
    request = cli_env.only("POST", "/jobs/job-0001/backfill")
    assert request.json() == {"from": "2026-12-01T00:00:00Z", "to": "2026-12-02T00:00:00Z"}
    lines = result.out.splitlines()
    assert lines[0] == "backfilled job job-0001: 2 run(s) from 2026-12-01T00:00:00Z to 2026-12-02T00:00:00Z"
    assert lines[1].split()[:3] == ["ID", "JOB", "STATE"]
    assert cli("jobs", "backfill", "job-0001", "--from", "a", "--to", "b", "-q").out.split() == [
        r["id"] for r in runs
    ]


def backfill_record(**fields: object) -> dict:
    base = {
        "id": "b" + "1" * 24, "job_id": "job-0001", "from": "2026-01-01T00:00:00.000Z",
        "to": "2026-02-11T15:00:00.000Z", "state": "running", "planned": 1000, "done": 0, "created": 0,
        "existing": 0, "sent": 0, "error": None, "created_at": "2026-12-01T00:00:00.000Z",
        "updated_at": "2026-12-01T00:00:00.000Z", "finished_at": None, "runs": "/jobs/job-0001/runs",
    }  # fmt: skip
    return {**base, **fields}


def test_a_background_backfill_is_followed_to_its_end(cli, cli_env: ContractServer) -> None:
    # Given the API answers 202 with a running backfill, then shows it done
    bid = "b" + "1" * 24
    cli_env.respond("POST", "/jobs/job-0001/backfill", 202, backfill_record())
    done = backfill_record(state="succeeded", done=1000, created=990, existing=10, sent=1000)
    cli_env.respond("GET", f"/jobs/job-0001/backfills/{bid}", 200, done)
    # When the CLI backfills with a key
    result = cli(
        "jobs", "backfill", "job-0001", "--from", "2026-01-01T00:00:00Z", "--to", "2026-02-11T15:00:00Z",
        "--idempotency-key", "k-1",
    )  # fmt: skip
    # Then it sent the key, followed the backfill, showed its progress and summed it up
    assert cli_env.only("POST", "/jobs/job-0001/backfill").headers["idempotency-key"] == "k-1"
    assert result.code == 0
    assert result.out.startswith("backfilled job job-0001: 1000 run(s) from 2026-01-01T00:00:00Z")
    assert f"backfill {bid}: succeeded, 1000/1000 decided (990 created, 10 existing, 1000 sent)" in result.err


def test_a_background_backfill_with_no_wait_prints_how_to_follow_it(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs/job-0001/backfill", 202, backfill_record())
    result = cli("jobs", "backfill", "job-0001", "--from", "a", "--to", "b", "--no-wait")
    assert result.out.splitlines() == [
        f"backfill {'b' + '1' * 24}: running, 0/1000 decided (0 created, 0 existing, 0 sent)",
        f"follow it with: jobsched jobs backfill-status job-0001 {'b' + '1' * 24}",
    ]
    assert [r.method for r in cli_env.requests] == ["POST"]


def test_a_failed_background_backfill_exits_1(cli, cli_env: ContractServer) -> None:
    bid = "b" + "1" * 24
    failed = backfill_record(state="failed", error="the backfill's job snapshot is missing or changed")
    cli_env.respond("GET", f"/jobs/job-0001/backfills/{bid}", 200, failed)
    result = cli("jobs", "backfill-status", "job-0001", bid)
    assert result.code == 1 and "failed" in result.out and "snapshot" in result.out


def test_trigger_sends_the_payload_and_the_idempotency_key(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs/job-0001/trigger", 201, run_body(id="r-1", state="queued"))
    cli("jobs", "trigger", "job-0001", "--payload", '{"n": 1}', "--idempotency-key", "k1")
    request = cli_env.only("POST", "/jobs/job-0001/trigger")
    assert request.json() == {"payload": {"n": 1}}
    assert request.headers["idempotency-key"] == "k1"


def test_retry_sends_a_corrected_payload(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", f"/runs/{RUN_ID}/retry", 200, run_body(state="queued"))
    cli("runs", "retry", RUN_ID, "--payload", '{"fixed": true}')
    assert cli_env.only("POST", f"/runs/{RUN_ID}/retry").json() == {"payload": {"fixed": True}}


def test_pause_shows_the_note_and_the_withdrawn_runs(cli, cli_env: ContractServer) -> None:
    """Given a pause that withdrew two runs queued ahead, When it is shown,
    Then the note and both run ids are printed"""
    paused = job_body(state="paused", paused_note="maintenance", withdrawn_runs=["r-a", "r-b"])
    cli_env.respond("POST", "/jobs/job-0001/pause", 200, paused)
    out = cli("jobs", "pause", "job-0001", "--note", "maintenance").out
    assert "paused note:  maintenance" in out
    assert "withdrew 2 run(s) queued ahead (now skipped, reason paused):" in out
    assert out.splitlines()[-2:] == ["  r-a", "  r-b"]


def test_pause_that_withdrew_nothing_says_so(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs/job-0001/pause", 200, job_body(state="paused", withdrawn_runs=[]))
    out = cli("jobs", "pause", "job-0001").out
    assert out.splitlines()[-1] == "withdrew no runs (none was queued ahead)"
    assert "paused note" not in out


def test_cancel_of_a_running_run_shows_that_the_cancel_is_pending(cli, cli_env: ContractServer) -> None:
    """Given a running run whose cancel the API recorded (cancel_requested), When cancelled,
    Then the output says a cancel is pending, not only `state: running`"""
    cli_env.respond("POST", f"/runs/{RUN_ID}/cancel", 200, run_body(state="running", cancel_requested=True))
    out = cli("runs", "cancel", RUN_ID).out
    assert "cancel:" in out and "requested" in out
    assert f"cancel pending: {RUN_ID} is still running" in out


def test_cancel_of_a_queued_run_shows_no_pending_note(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", f"/runs/{RUN_ID}/cancel", 200, run_body(state="cancelled", cancel_requested=True))
    out = cli("runs", "cancel", RUN_ID).out
    assert "cancel pending" not in out and "cancel:" not in out


def test_get_pretty_prints_json_and_whole_floats(cli, cli_env: ContractServer) -> None:
    """Given a job with float retry settings and a nested payload, When shown,
    Then retry reads `base_seconds: 2` and a long payload is indented over several lines"""
    payload = {"customer": {"id": 42, "tags": ["a", "b"], "address": {"city": "Lyon", "zip": "69001"}}}
    job = job_body(retry={"max_attempts": 3, "base_seconds": 2.0, "max_seconds": 300.0}, payload=payload)
    cli_env.respond("GET", "/jobs/job-0001", 200, job)
    out = cli("jobs", "get", "job-0001").out
    assert re.search(r'^retry: +\{"max_attempts": 3, "base_seconds": 2, "max_seconds": 300\}$', out, re.M)
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("payload:"))
    value_column = lines[start].index("{")
    assert lines[start].endswith("{")
    assert lines[start + 1] == " " * value_column + '  "customer": {'


def test_get_cuts_a_large_value_with_a_hint_to_use_json(cli, cli_env: ContractServer) -> None:
    """Given a run with a 64 KB output, When shown, Then no line is over 250 characters and a hint
    says --json shows all; --json still prints the whole output"""
    run = run_body(output={"blob": "x" * 65536, "items": list(range(100))})
    cli_env.respond("GET", f"/runs/{RUN_ID}", 200, run)
    out = cli("runs", "get", RUN_ID).out
    assert max(len(line) for line in out.splitlines()) < 250
    assert "(cut; --json shows all)" in out
    assert len(out) < 5000
    assert json.loads(cli("runs", "get", RUN_ID, "--json").out)["output"] == run["output"]


def test_admin_map_sends_the_mapping(cli, cli_env: ContractServer) -> None:
    arn = "arn:aws:iam::123456789012:role/ops"
    body = {"principal": arn, "tenant": "acme", "updated_at": "2026-12-01T09:00:00.000Z"}
    cli_env.respond("PUT", "/admin/principals", 200, body)
    result = cli("admin", "principals", "map", arn, "acme")
    assert cli_env.only("PUT", "/admin/principals").json() == {"principal": arn, "tenant": "acme"}
    assert result.out.strip() == f"mapped {arn} to tenant acme"


def test_admin_unmap_sends_the_principal_in_the_query(cli, cli_env: ContractServer) -> None:
    arn = "arn:aws:iam::123456789012:role/ops"
    cli_env.respond("DELETE", "/admin/principals", 204, None)
    result = cli("admin", "principals", "unmap", arn)
    assert cli_env.only("DELETE", "/admin/principals").query == {"principal": [arn]}
    assert result.out.strip() == f"unmapped {arn}"


def test_health_prints_status_and_version(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "GET", "/health", 200, {"status": "ok", "version": "0.1.0", "time": "2026-12-01T09:00:00.000Z"}
    )
    out = cli("health").out.strip()
    assert out == f"ok: jobsched 0.1.0 at {cli_env.url}, server time 2026-12-01T09:00:00.000Z"


def test_a_validation_error_of_preview_prints_the_documented_error_line(cli) -> None:
    result = cli("preview", "61 * * * *")
    assert result.code == 2
    assert result.err.startswith("error: validation_error: ")


def test_create_sends_the_notify_flags_as_the_jobs_notify(cli, cli_env: ContractServer) -> None:
    """Given the notify flags, When a job is created, Then the body's notify holds them"""
    cli_env.respond("POST", "/jobs", 201, job_body())
    arn = "arn:aws:sns:us-east-1:123456789012:team-a"
    hook = "https://hooks.example.com/x"
    flags = ("--notify-sns-topic-arn", arn, "--notify-webhook", hook)
    result = cli("jobs", "create", "--name", "n", "--schedule", "@daily", "--handler", "demo.echo", *flags)
    assert result.code == 0, result.err
    [request] = [r for r in cli_env.requests if r.method == "POST"]
    assert request.json()["notify"] == {"sns_topic_arn": arn, "webhook": hook}


def test_update_with_no_notify_sends_an_empty_notify(cli, cli_env: ContractServer) -> None:
    cli_env.respond("PATCH", "/jobs/job-0001", 200, job_body())
    result = cli("jobs", "update", "job-0001", "--no-notify", "--if-match", "1")
    assert result.code == 0, result.err
    [request] = [r for r in cli_env.requests if r.method == "PATCH"]
    assert request.json() == {"notify": {}}


def test_settings_notify_set_and_clear_send_the_tenant_default(cli, cli_env: ContractServer) -> None:
    """Given the settings commands, Then set PUTs the flags and clear PUTs {}"""
    cli_env.respond("PUT", "/settings/notify", 200, {"notify": {"webhook": "https://h.example.com"}})
    cli_env.respond("PUT", "/settings/notify", 200, {"notify": {}})
    assert cli("settings", "notify", "set", "--webhook", "https://h.example.com").out.strip() == (
        "webhook: https://h.example.com"
    )
    assert "nobody" in cli("settings", "notify", "clear").out
    bodies = [r.json() for r in cli_env.requests if r.method == "PUT"]
    assert bodies == [{"webhook": "https://h.example.com"}, {}]
    assert cli("settings", "notify", "set").code == 2


def test_logs_prints_the_runs_lines_one_json_object_per_line(cli, cli_env: ContractServer) -> None:
    """Given the embedded mode serving a run's lines, When `runs logs` runs, Then each line is printed
    as one compact JSON object, in the order served."""
    lines = [{"message": "a", "run_id": RUN_ID}, {"message": "b", "run_id": RUN_ID}]
    cli_env.respond(
        "GET", f"/runs/{RUN_ID}/logs", 200, {"run_id": RUN_ID, "items": lines, "truncated": False}
    )
    result = cli("runs", "logs", RUN_ID)
    assert result.code == 0
    assert [json.loads(line) for line in result.out.splitlines()] == lines


def test_logs_where_the_route_is_not_served_prints_the_log_group_and_query(
    cli, cli_env: ContractServer
) -> None:
    """Given a deployment whose lines route answers 404 (AWS), When `runs logs` runs, Then it prints the
    run's log group and Logs Insights query, exit 0."""
    cli_env.respond("GET", f"/runs/{RUN_ID}/logs", 404, {"code": "not_found", "message": "not here"})
    link = {
        "log_group": "/aws/lambda/w",
        "insights_query": "fields @timestamp | filter run_id = 'x'",
        "lines": None,
    }
    cli_env.respond("GET", f"/runs/{RUN_ID}", 200, run_body(logs=link))
    result = cli("runs", "logs", RUN_ID)
    assert result.code == 0
    assert "log group: /aws/lambda/w" in result.out
    assert "insights query: fields @timestamp | filter run_id = 'x'" in result.out


LIMITS = {
    "tenant": "acme",
    "max_running": 50,
    "runs_per_second": None,
    "burst": None,
    "source": {"max_running": "tenant", "runs_per_second": "default"},
}


def test_admin_limits_get_prints_each_limit_with_its_source(cli, cli_env: ContractServer) -> None:
    """Given acme's limits (its own max_running, no rate), When `admin limits get` prints them,
    Then each row shows the value and where it comes from"""
    cli_env.respond("GET", "/admin/tenants/acme/limits", 200, LIMITS)
    result = cli("admin", "limits", "get", "acme")
    assert result.out.splitlines() == [
        "tenant:           acme",
        "max running:      50 (tenant)",
        "runs per second:  none (default)",
        "burst:            -",
    ]


def test_admin_limits_set_sends_only_the_limits_given(cli, cli_env: ContractServer) -> None:
    """Given `admin limits set` with a rate and a burst, Then the PUT body holds those two only; without
    any limit it is a usage error and sends nothing"""
    cli_env.respond("PUT", "/admin/tenants/acme/limits", 200, LIMITS)
    cli("admin", "limits", "set", "acme", "--runs-per-second", "2.5", "--burst", "5")
    assert cli_env.only("PUT", "/admin/tenants/acme/limits").json() == {"runs_per_second": 2.5, "burst": 5}
    assert cli("admin", "limits", "set", "acme", "--burst", "5").code == 2


def test_jobs_create_sends_the_limit_flags(cli, cli_env: ContractServer) -> None:
    """Given the limit flags of `jobs create`, Then the body holds concurrency and rate_limit"""
    cli_env.respond("POST", "/jobs", 201, job_body())
    cli(
        "jobs", "create", "--name", "n", "--schedule", "@daily", "--handler", "demo.echo",
        "--concurrency-limit", "2", "--concurrency-key", "db", "--rate-per-second", "0.5",
    )  # fmt: skip
    body = cli_env.only("POST", "/jobs").json()
    assert body["concurrency"] == {"limit": 2, "key": "db"}
    assert body["rate_limit"] == {"per_second": 0.5}
