"""`jobsched handlers ...` against a contract server (issue 29 §5)."""

from __future__ import annotations

from tests.cli.conftest import ContractServer


def version(**overrides) -> dict:
    item = {
        "name": "report",
        "version": 1,
        "newest": False,
        "status": "draining",
        "description": "",
        "payload_schema": None,
        "upgrades_from": [],
        "jobs": 2,
        "queued": 1,
        "running": 0,
        "retrying": 0,
        "dead_lettered": 3,
        "examples": {"jobs": ["j1", "j2"], "runs": ["r1"]},
    }
    item.update(overrides)
    return item


def listing(**overrides) -> dict:
    body = {
        "code_version": "abc123",
        "scope": "tenant",
        "handlers": [version(), version(version=2, newest=True, status="active", upgrades_from=[1], jobs=5)],
        "unpinned_payload_versions": {"report": {"2": 5}},
        "missing": [],
    }
    body.update(overrides)
    return body


def test_handlers_prints_a_row_per_version_with_its_counts(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/handlers", 200, listing())
    lines = cli("handlers").out.splitlines()
    assert lines[0].split() == [
        "HANDLER", "VERSION", "NEWEST", "STATUS", "JOBS", "QUEUED", "RUNNING", "RETRYING", "DEAD",
        "UPGRADES_FROM",
    ]  # fmt: skip
    assert lines[1].split() == ["report", "1", "no", "draining", "2", "1", "0", "0", "3", "-"]
    assert lines[2].split() == ["report", "2", "yes", "active", "5", "1", "0", "0", "3", "1"]
    assert lines[3].startswith("code version: abc123")
    assert cli_env.only("GET", "/handlers").query == {}


def test_handlers_all_asks_for_every_tenant_and_lists_missing_references(
    cli, cli_env: ContractServer
) -> None:
    missing = {**version(name="gone", version=None), "jobs": 1}
    del missing["newest"], missing["status"]
    cli_env.respond("GET", "/handlers", 200, listing(scope="all", handlers=[], missing=[missing]))
    result = cli("handlers", "--all")
    assert cli_env.only("GET", "/handlers").query == {"scope": ["all"]}
    assert result.out.splitlines()[1].split()[:5] == ["gone", "unbound", "-", "missing", "1"]


def test_handlers_json_prints_the_api_body(cli, cli_env: ContractServer) -> None:
    import json

    cli_env.respond("GET", "/handlers", 200, listing())
    assert json.loads(cli("handlers", "--json").out) == listing()


def test_drain_and_undrain_send_the_version_and_show_its_status(cli, cli_env: ContractServer) -> None:
    cli_env.respond("POST", "/handlers/report/versions/1/drain", 200, version())
    cli_env.respond("DELETE", "/handlers/report/versions/1/drain", 200, version(status="active"))
    drained = cli("handlers", "drain", "report", "1")
    assert drained.code == 0 and "status:" in drained.out and "draining" in drained.out
    assert cli("handlers", "undrain", "report", "1", "-q").out == "active\n"


def test_draining_the_newest_version_reports_the_conflict(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "POST",
        "/handlers/report/versions/2/drain",
        409,
        {"error": "handler_version_draining", "message": "the newest registered version"},
    )
    result = cli("handlers", "drain", "report", "2")
    assert (result.code, result.err.strip()) == (
        1,
        "error: handler_version_draining: the newest registered version",
    )


def test_deploy_checks_lists_and_records(cli, cli_env: ContractServer) -> None:
    check = {
        "forced": True,
        "code_version": "abc",
        "problems": [{"name": "report", "version": 1}],
        "recorded_at": "2026-12-01T09:00:00.000Z",
        "recorded_by": "token:ops",
    }
    cli_env.respond("GET", "/handlers/deploy-checks", 200, {"items": [check]})
    cli_env.respond("POST", "/handlers/deploy-checks", 201, check)
    assert cli("handlers", "deploy-checks").out.splitlines()[1].split() == [
        "2026-12-01T09:00:00Z", "token:ops", "abc", "1",
    ]  # fmt: skip
    cli(
        "handlers",
        "deploy-checks",
        "record",
        "--code-version",
        "abc",
        "--problems",
        '[{"name": "report", "version": 1}]',
    )
    assert cli_env.only("POST", "/handlers/deploy-checks").json() == {
        "forced": True,
        "code_version": "abc",
        "problems": [{"name": "report", "version": 1}],
    }


def test_jobs_create_with_a_handler_version_pins_it(cli, cli_env: ContractServer) -> None:
    from tests.cli.conftest import job_body

    cli_env.respond("POST", "/jobs", 201, job_body())
    job = ("jobs", "create", "--name", "n", "--schedule", "@daily")
    result = cli(*job, "--handler", "report", "--handler-version", "1")
    assert result.code == 0, result.err
    assert cli_env.only("POST", "/jobs").json()["target"] == {"handler": "report", "version": 1}
    assert cli(*job, "--http-url", "https://x.example", "--handler-version", "1").code == 2
