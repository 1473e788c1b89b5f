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
