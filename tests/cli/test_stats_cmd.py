"""`jobsched stats` against a contract server (docs/cli.md, "stats"): it sends the range and the bucket
as `GET /stats` takes them, and prints one row per bucket with runs and the range's totals."""

from __future__ import annotations

from tests.cli.conftest import ContractServer


def _bucket(start: str, **counts: object) -> dict:
    empty = {"succeeded": 0, "failed": 0, "cancelled": 0, "skipped": 0, "dead_lettered": 0, "lag_count": 0}
    return {"start": start, **empty, "lag_p50": None, "lag_p99": None, "lag_bins": [0] * 12, **counts}


ANSWER = {
    "start": "2026-12-01T09:00:00Z",
    "end": "2026-12-01T12:00:00Z",
    "bucket": "hour",
    "lag_bounds": [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600, 86400],
    "buckets": [
        _bucket("2026-12-01T09:00:00Z", succeeded=40, failed=2, dead_lettered=1, lag_count=42, lag_p50=0.5,
                lag_p99=2.0),
        _bucket("2026-12-01T10:00:00Z"),
        _bucket("2026-12-01T11:00:00Z", skipped=3, cancelled=1),
    ],
}  # fmt: skip


def test_stats_sends_the_range_and_bucket_and_prints_the_buckets_with_runs(
    cli, cli_env: ContractServer
) -> None:
    cli_env.respond("GET", "/stats", 200, ANSWER)
    result = cli(
        "stats", "--from", "2026-12-01T09:00:00Z", "--to", "2026-12-01T12:00:00Z", "--bucket", "hour"
    )
    request = cli_env.only("GET", "/stats")
    assert (request.query["from"], request.query["to"], request.query["bucket"]) == (
        ["2026-12-01T09:00:00Z"],
        ["2026-12-01T12:00:00Z"],
        ["hour"],
    )
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "BUCKET",
        "SUCCEEDED",
        "FAILED",
        "DEAD",
        "CANCELLED",
        "SKIPPED",
        "LAG_P50",
        "LAG_P99",
    ]
    assert lines[1].split() == ["2026-12-01T09:00:00Z", "40", "2", "1", "0", "0", "0.5s", "2s"]
    assert lines[2].split() == ["2026-12-01T11:00:00Z", "0", "0", "0", "1", "3", "-", "-"]
    assert lines[3] == (
        "40 succeeded, 2 failed, 1 dead lettered, 1 cancelled, 3 skipped "
        "from 2026-12-01T09:00:00Z to 2026-12-01T12:00:00Z"
    )


def test_stats_empty_lists_every_bucket_and_defaults_to_minutes(cli, cli_env: ContractServer) -> None:
    cli_env.respond("GET", "/stats", 200, ANSWER)
    result = cli("stats", "--empty", "-q")
    request = cli_env.only("GET", "/stats")
    assert request.query.get("bucket") == ["minute"] and "from" not in request.query
    assert [line.split()[0] for line in result.out.splitlines()[1:]] == [
        "2026-12-01T09:00:00Z",
        "2026-12-01T10:00:00Z",
        "2026-12-01T11:00:00Z",
    ]
