"""`jobsched budget` and `jobsched admin budget ...` (decision 0062), against a contract server."""

from __future__ import annotations

from tests.cli.conftest import ContractServer

STATUS = {
    "tenant": "acme",
    "month": "2026-12",
    "monthly_usd": 50.0,
    "spent_usd": 42.5,
    "percent_used": 85.0,
    "state": "warning",
}


def test_set_sends_the_amount_and_shows_the_state(cli, cli_env: ContractServer) -> None:
    cli_env.respond("PUT", "/admin/tenants/acme/budget", 200, STATUS)
    result = cli("admin", "budget", "set", "acme", "50")
    assert result.code == 0, result.err
    assert cli_env.only("PUT", "/admin/tenants/acme/budget").json() == {"monthly_usd": 50.0}
    for shown in ("monthly budget", "50 USD", "42.5 USD", "85 %", "warning", "2026-12"):
        assert shown in result.out


def test_a_tenant_reads_its_own_budget(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/budget", 200, {**STATUS, "state": "capped", "percent_used": 104.0})
    result = cli("budget", "--quiet")
    assert (result.code, result.out.strip()) == (0, "capped")


def test_list_shows_a_row_per_tenant(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/admin/tenants/budgets", 200, {"items": [STATUS], "next_cursor": None})
    result = cli("admin", "budget", "list")
    assert result.code == 0, result.err
    assert "TENANT" in result.out and "acme" in result.out and "warning" in result.out


def test_a_bad_amount_is_refused_by_the_server_and_shown(cli, cli_env: ContractServer) -> None:
    cli_env.respond(
        "PUT",
        "/admin/tenants/acme/budget",
        422,
        {"error": "validation_error", "message": "monthly_usd: Input should be greater than 0"},
    )
    result = cli("admin", "budget", "set", "acme", "0")
    assert result.code != 0
    assert "monthly_usd" in result.err


def test_clear_sends_delete(cli, cli_env: ContractServer) -> None:
    cli_env.respond("DELETE", "/admin/tenants/acme/budget", 204, None)
    result = cli("admin", "budget", "clear", "acme")
    assert result.code == 0, result.err
    assert cli_env.only("DELETE", "/admin/tenants/acme/budget")
    assert "no budget" in result.out


REFUSED = {
    "error": "budget_exhausted",
    "message": "trigger of job-0001 refused: tenant acme has spent 12.00 USD of its monthly budget of "
    "10.00 USD (120.0 % in 2026-12), so no new run starts; an administrator raises or clears it with "
    "PUT /admin/tenants/acme/budget (or DELETE), or it resets with the next UTC month",
}
RUN_ID = "job-0001.20261201T000000.000Z"


def test_every_on_demand_run_refused_for_the_budget_exits_non_zero_with_the_message_and_a_hint(
    cli, cli_env: ContractServer
) -> None:
    # Given the API refuses acme's on-demand runs (409 budget_exhausted)
    calls = {
        ("POST", "/jobs/job-0001/trigger"): ("jobs", "trigger", "job-0001"),
        ("POST", "/jobs/job-0001/backfill"): (
            "jobs",
            "backfill",
            "job-0001",
            "--from",
            "2026-12-01T00:00:00Z",
            "--to",
            "2026-12-02T00:00:00Z",
        ),
        ("POST", "/workflows/job-0001/runs"): ("workflows", "run", "job-0001"),
        ("POST", f"/dead-letters/{RUN_ID}/replay"): ("dlq", "replay", RUN_ID),
        ("POST", "/dead-letters/replay"): ("dlq", "replay", "--job", "job-0001"),
        ("POST", f"/runs/{RUN_ID}/retry"): ("runs", "retry", RUN_ID),
    }
    for (method, path), argv in calls.items():
        cli_env.respond(method, path, 409, REFUSED)
        # When the command runs
        result = cli(*argv)
        # Then it exits 1 with the API's message, and a hint naming the CLI's budget commands
        assert result.code == 1, (argv, result.out, result.err)
        assert "error: budget_exhausted: trigger of job-0001 refused" in result.err
        assert "jobsched admin budget set acme <usd>" in result.err and "jobsched budget" in result.err
