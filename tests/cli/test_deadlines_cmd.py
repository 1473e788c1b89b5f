"""Deadlines in the CLI against a contract server (docs/cli.md): `jobs create --deadline-seconds`
sends the field; `jobs get` and `runs get` show it, and the miss once reported."""

from __future__ import annotations

from tests.cli.conftest import ContractServer, job_body, run_body

RUN_ID = "job-0001.20261201T090000Z"


def test_create_with_a_deadline_sends_it_and_shows_it(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs", 201, job_body(deadline_seconds=600))
    result = cli(
        "jobs", "create", "--name", "hello", "--schedule", "@hourly", "--handler", "demo.echo",
        "--deadline-seconds", "600",
    )  # fmt: skip
    assert cli_env.only("POST", "/jobs").json()["deadline_seconds"] == 600
    assert result.code == 0
    assert "deadline:" in result.out and "600s after each instant" in result.out


def test_a_job_without_a_deadline_shows_no_deadline_row(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/jobs/job-0001", 200, job_body(deadline_seconds=0))
    assert "deadline:" not in cli("jobs", "get", "job-0001").out


def test_runs_get_shows_the_deadline_and_when_it_was_found_missed(cli, cli_env: ContractServer) -> None:
    run = run_body(deadline_at="2026-12-01T09:10:00Z", deadline_missed_at="2026-12-01T09:12:04Z")
    cli_env.respond("GET", f"/runs/{RUN_ID}", 200, run)
    fields = cli("runs", "get", RUN_ID).out.split("\n\n")[0].splitlines()
    assert any(line.split() == ["deadline:", "2026-12-01T09:10:00Z"] for line in fields)
    assert any(line.split() == ["deadline", "missed:", "2026-12-01T09:12:04Z"] for line in fields)


def test_runs_get_of_a_run_without_a_deadline_shows_neither_row(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", f"/runs/{RUN_ID}", 200, run_body())
    assert "deadline" not in cli("runs", "get", RUN_ID).out
