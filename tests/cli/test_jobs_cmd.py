"""`jobsched jobs ...` against a contract server: the requests it sends, what it prints, exit codes."""

from __future__ import annotations

import json

from tests.cli.conftest import TOKEN, ContractServer, job_body, run_body


def test_create_from_flags_sends_the_job_body_and_prints_the_job(cli, cli_env: ContractServer) -> None:
    # Given the API accepts the job
    cli_env.respond("POST", "/jobs", 201, job_body())
    # When a job is created from flags
    result = cli(
        "jobs", "create", "--name", "hello", "--schedule", "* * * * *", "--tz", "Europe/Paris",
        "--handler", "demo.echo", "--payload", '{"message": "hi"}', "--priority", "high",
        "--retry-max-attempts", "5", "--retry-base-seconds", "2", "--misfire-policy", "skip",
        "--jitter-seconds", "3", "--idempotency-key", "abc",
    )  # fmt: skip
    # Then the body holds exactly what the flags said, authenticated with the env token
    request = cli_env.only("POST", "/jobs")
    assert request.json() == {
        "name": "hello",
        "schedule": "* * * * *",
        "timezone": "Europe/Paris",
        "priority": "high",
        "misfire_policy": "skip",
        "jitter_seconds": 3,
        "payload": {"message": "hi"},
        "retry": {"max_attempts": 5, "base_seconds": 2.0},
        "target": {"handler": "demo.echo"},
    }
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["idempotency-key"] == "abc"
    # And the job is shown as labelled fields, exit 0
    assert result.code == 0
    assert "id:" in result.out and "job-0001" in result.out
    assert "next fires:" in result.out and "2026-12-01T09:00:00Z" in result.out


def test_create_from_file_with_a_flag_overriding_a_field(cli, cli_env: ContractServer, tmp_path) -> None:
    # Given a job file
    spec = {"name": "from-file", "schedule": "@hourly", "target": {"handler": "demo.echo"}, "payload": {}}
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    cli_env.respond("POST", "/jobs", 201, job_body(name="renamed"))
    # When it is created with --name on top
    result = cli("jobs", "create", "--file", str(path), "--name", "renamed", "--json")
    # Then the file's body is sent with the flag's value, and --json prints the API's job
    assert cli_env.only("POST", "/jobs").json() == {**spec, "name": "renamed"}
    assert result.code == 0
    assert json.loads(result.out)["name"] == "renamed"


def test_create_with_a_webhook_target(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs", 201, job_body())
    result = cli(
        "jobs", "create", "--name", "hook", "--schedule", "rate(5 minutes)", "--http-url",
        "https://example.com/hook", "--http-header", "X-Key=a=b", "--http-timeout-seconds", "10",
    )  # fmt: skip
    assert result.code == 0
    assert cli_env.only("POST", "/jobs").json()["target"] == {
        "http": {
            "url": "https://example.com/hook",
            "method": "POST",
            "headers": {"X-Key": "a=b"},
            "timeout_seconds": 10,
        }
    }


def test_create_without_a_schedule_is_a_usage_error_and_sends_nothing(cli, cli_env: ContractServer) -> None:
    result = cli("jobs", "create", "--name", "hello", "--handler", "demo.echo")
    assert result.code == 2
    assert result.err.strip() == "error: usage: missing --schedule (or give them in --file)"
    assert cli_env.requests == []


def test_create_with_a_payload_that_is_not_json_is_a_usage_error(cli, cli_env: ContractServer) -> None:
    result = cli(
        "jobs", "create", "--name", "a", "--schedule", "@daily", "--handler", "x", "--payload", "{oops"
    )
    assert result.code == 2
    assert result.err.startswith("error: usage: --payload is not valid JSON")
    assert cli_env.requests == []


def test_create_reads_the_payload_from_a_file(cli, cli_env: ContractServer, tmp_path) -> None:
    (tmp_path / "p.json").write_text('{"rows": [1, 2]}')
    cli_env.respond("POST", "/jobs", 201, job_body())
    cli(
        "jobs",
        "create",
        "--name",
        "a",
        "--schedule",
        "@daily",
        "--handler",
        "x",
        "--payload",
        f"@{tmp_path}/p.json",
    )
    assert cli_env.only("POST", "/jobs").json()["payload"] == {"rows": [1, 2]}


def test_an_invalid_choice_is_rejected_by_the_parser_with_exit_2(cli, cli_env: ContractServer) -> None:
    result = cli(
        "jobs", "create", "--name", "a", "--schedule", "@daily", "--handler", "x", "--priority", "urgent"
    )
    assert result.code == 2
    assert "invalid choice: 'urgent'" in result.err
    assert cli_env.requests == []


def test_an_api_validation_error_prints_code_and_message_and_exits_1(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "POST", "/jobs", 422, {"error": "validation_error", "message": "schedule: 5 fields expected, got 4"}
    )
    result = cli("jobs", "create", "--name", "a", "--schedule", "* * * *", "--handler", "demo.echo")
    assert result.code == 1
    assert result.err.strip() == "error: validation_error: schedule: 5 fields expected, got 4"
    assert result.out == ""


def test_list_prints_a_table_with_fixed_columns(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "GET",
        "/jobs",
        200,
        {"items": [job_body(), job_body(id="job-0002", name="nightly", state="paused")], "next_cursor": None},
    )
    result = cli("jobs", "list")
    lines = result.out.splitlines()
    assert result.code == 0
    assert lines[0].split() == ["ID", "NAME", "STATE", "SCHEDULE", "TZ", "NEXT", "FIRE", "VER"]
    assert lines[1].split()[:3] == ["job-0001", "hello", "active"]
    assert lines[2].split()[:3] == ["job-0002", "nightly", "paused"]
    assert lines[1].index("active") == lines[0].index("STATE")  # columns line up
    assert result.err == ""


def test_list_tells_on_stderr_how_to_get_the_next_page(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/jobs", 200, {"items": [job_body()], "next_cursor": "CUR2"})
    result = cli("jobs", "list", "--limit", "1")
    assert cli_env.only("GET", "/jobs").query == {"limit": ["1"]}
    assert "--cursor CUR2" in result.err
    assert "CUR2" not in result.out


def test_list_all_follows_every_page_and_prints_one_json_list(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/jobs", 200, {"items": [job_body(id="j2")], "next_cursor": "c2"})
    cli_env.respond("GET", "/jobs", 200, {"items": [job_body(id="j1")], "next_cursor": None})
    result = cli("jobs", "list", "--all", "--json")
    assert json.loads(result.out) == {"items": [job_body(id="j2"), job_body(id="j1")], "next_cursor": None}
    assert len(cli_env.requests) == 2


def test_list_quiet_prints_only_ids(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "GET", "/jobs", 200, {"items": [job_body(id="j2"), job_body(id="j1")], "next_cursor": None}
    )
    assert cli("jobs", "list", "-q").out == "j2\nj1\n"


def test_get_of_a_missing_job_exits_1_with_the_api_message(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/jobs/nope", 404, {"error": "not_found", "message": "job nope not found"})
    result = cli("jobs", "get", "nope")
    assert (result.code, result.err.strip()) == (1, "error: not_found: job nope not found")


def test_pause_sends_the_note(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs/job-0001/pause", 200, job_body(state="paused"))
    result = cli("jobs", "pause", "job-0001", "--note", "maintenance")
    assert cli_env.only("POST", "/jobs/job-0001/pause").json() == {"note": "maintenance"}
    assert "paused" in result.out


def test_resume_sends_the_misfire_override(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs/job-0001/resume", 200, job_body())
    result = cli("jobs", "resume", "job-0001", "--misfire-policy", "run_all")
    assert cli_env.only("POST", "/jobs/job-0001/resume").json() == {"misfire_policy": "run_all"}
    assert result.code == 0


def test_trigger_prints_the_new_run(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs/job-0001/trigger", 201, run_body(id="job-0001.manual.x1", state="queued"))
    result = cli("jobs", "trigger", "job-0001")
    assert result.out.strip() == "triggered job job-0001: run job-0001.manual.x1 (queued)"


def test_trigger_quiet_prints_the_run_id_for_scripts(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs/job-0001/trigger", 201, run_body(id="r-1", state="queued"))
    assert cli("jobs", "trigger", "job-0001", "-q").out == "r-1\n"


def test_delete_without_if_match_deletes_the_version_it_reads(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/jobs/job-0001", 200, job_body(version=4))
    cli_env.respond("DELETE", "/jobs/job-0001", 204, None)
    result = cli("jobs", "delete", "job-0001")
    assert cli_env.only("DELETE", "/jobs/job-0001").headers["if-match"] == "4"
    assert (result.code, result.out.strip()) == (0, "deleted job job-0001")


def test_delete_with_a_stale_version_exits_1(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "DELETE", "/jobs/job-0001", 412, {"error": "precondition_failed", "message": "version is 5"}
    )
    result = cli("jobs", "delete", "job-0001", "--if-match", "4")
    assert [r.method for r in cli_env.requests] == ["DELETE"]
    assert (result.code, result.err.strip()) == (1, "error: precondition_failed: version is 5")


def test_an_unreachable_api_exits_1_with_a_connection_error(cli, monkeypatch) -> None:
    monkeypatch.setenv("JOBSCHED_URL", "http://127.0.0.1:9")
    result = cli("jobs", "list")
    assert result.code == 1
    assert result.err.startswith("error: connection_error: cannot reach http://127.0.0.1:9")


def test_url_and_token_flags_override_the_environment(cli, api: ContractServer, monkeypatch) -> None:
    monkeypatch.setenv("JOBSCHED_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("JOBSCHED_TOKEN", "env-token")
    api.respond("GET", "/jobs", 200, {"items": [], "next_cursor": None})
    result = cli("jobs", "list", "--url", api.url, "--token", "flag-token")
    assert api.only("GET", "/jobs").headers["authorization"] == "Bearer flag-token"
    assert result.out.strip() == "no jobs"
