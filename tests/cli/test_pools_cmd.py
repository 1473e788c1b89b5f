"""`jobsched jobs create|update --pool`, and the pool in `jobs get` and `runs get` (docs/pools.md)."""

from __future__ import annotations

from tests.cli.conftest import ContractServer, job_body, run_body


def test_create_with_a_pool_and_a_long_timeout_sends_both(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs", 201, job_body(pool="container", timeout_seconds=2400))
    result = cli(
        "jobs", "create", "--name", "export", "--schedule", "0 2 * * *", "--handler", "demo.echo",
        "--pool", "container", "--timeout-seconds", "2400",
    )  # fmt: skip
    body = cli_env.only("POST", "/jobs").json()
    assert (body["pool"], body["timeout_seconds"]) == ("container", 2400)
    # And the job printed names its pool
    assert result.code == 0
    assert any(line.split() == ["pool:", "container"] for line in result.out.splitlines())


def test_create_without_a_pool_sends_none_the_api_chooses(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/jobs", 201, job_body(pool="container", timeout_seconds=2400))
    cli("jobs", "create", "--name", "export", "--schedule", "@daily", "--handler", "demo.echo",
        "--timeout-seconds", "2400")  # fmt: skip
    assert "pool" not in cli_env.only("POST", "/jobs").json()


def test_an_unknown_pool_is_refused_by_the_parser(cli, cli_env: ContractServer) -> None:
    result = cli(
        "jobs", "create", "--name", "x", "--schedule", "@daily", "--handler", "demo.echo", "--pool", "gpu"
    )
    assert result.code == 2 and "--pool" in result.err
    assert cli_env.requests == []


def test_update_moves_a_job_to_the_container_pool(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/jobs/job-0001", 200, job_body(version=2))
    cli_env.respond(
        "PATCH", "/jobs/job-0001", 200, job_body(version=3, pool="container", timeout_seconds=3600)
    )
    result = cli("jobs", "update", "job-0001", "--pool", "container", "--timeout-seconds", "3600")
    assert cli_env.only("PATCH", "/jobs/job-0001").json() == {"pool": "container", "timeout_seconds": 3600}
    assert result.code == 0


def test_runs_get_prints_the_pool(cli, cli_env: ContractServer) -> None:
    run = run_body(pool="long")
    cli_env.respond("GET", f"/runs/{run['id']}", 200, run)
    out = cli("runs", "get", run["id"]).out
    assert any(line.split() == ["pool:", "long"] for line in out.splitlines())
