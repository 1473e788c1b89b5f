"""`jobsched usage` against a contract server: the counters of decision 0059 amended in the table."""

from __future__ import annotations

from tests.cli.conftest import ContractServer


def day(**overrides) -> dict:
    item = {
        "tenant": "acme",
        "day": "2026-12-05",
        "runs_started": 4,
        "runs_succeeded": 4,
        "runs_failed": 0,
        "runs_cancelled": 0,
        "runs_dead_lettered": 0,
        "run_seconds": 1.5,
        "throttled_waits": 0,
        "wru": 12.0,
        "rru": 3.0,
        "sqs_requests": 8.0,
        "lambda_gb_seconds": 0.4,
        "lambda_requests": 2.0,
        "sfn_transitions": 9.0,
        "sns_publishes": 1.0,
        "fargate_vcpu_seconds": 37.5,
        "fargate_gb_seconds": 75.0,
        "estimated_usd": 0.000571,
    }
    item.update(overrides)
    return item


def test_the_table_shows_transitions_publishes_and_fargate_seconds(cli, cli_env: ContractServer) -> None:
    page = {"items": [day()], "first_day": "2026-11-29", "last_day": "2026-12-05", "next_cursor": None}
    cli_env.respond("GET", "/usage", 200, page)
    header, row = cli("usage").out.splitlines()[:2]
    assert header.split()[-4:] == ["SFN", "SNS", "VCPU_S", "EST_USD"]
    assert row.split()[-4:] == ["9", "1", "37.5", "0.000571"]
