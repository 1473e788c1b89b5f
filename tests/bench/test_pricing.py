"""Pricing and billing-unit arithmetic, as tables of (usage, expected dollars)."""

from __future__ import annotations

import pytest

from jobsched.aws.metering import read_units, write_units
from jobsched.bench.pricing import US_EAST_1, Prices, Usage, billed_gb_seconds, cost_of, cost_per_million_runs


@pytest.mark.parametrize(
    ("usage", "line", "expected_usd"),
    [
        (Usage(wru=1_000_000), "dynamodb_writes", 0.625),
        (Usage(rru=1_000_000), "dynamodb_reads", 0.125),
        (Usage(sqs_requests=1_000_000), "sqs", 0.40),
        (Usage(lambda_invocations=1_000_000), "lambda_requests", 0.20),
        (Usage(lambda_gb_seconds=1_000_000), "lambda_duration", 13.3334),
        (Usage(wru=3, rru=1.5), "dynamodb_writes", 3 * 0.625e-6),
    ],
)
def test_each_line_item_is_priced_at_the_us_east_1_list_price(usage: Usage, line: str, expected_usd: float):
    # Given usage in one billing unit / When it is priced / Then that line costs the list price
    cost = cost_of(usage, US_EAST_1)
    assert getattr(cost, line) == pytest.approx(expected_usd)


def test_total_is_the_sum_of_the_line_items():
    # Given usage on every line
    usage = Usage(wru=2e6, rru=4e6, sqs_requests=3e6, lambda_invocations=1e6, lambda_gb_seconds=1e5)
    # When priced
    cost = cost_of(usage)
    # Then the total adds them up: 1.25 + 0.5 + 1.2 + 0.2 + 1.33334
    assert cost.total == pytest.approx(1.25 + 0.5 + 1.2 + 0.2 + 1.33334)


@pytest.mark.parametrize(
    ("usage", "runs", "expected_total"),
    [
        # 5 WRU + 2 RRU + 3 SQS requests + 1 invocation of 10 ms at 0.5 GB, per run
        (
            Usage(wru=5, rru=2, sqs_requests=3, lambda_invocations=1, lambda_gb_seconds=0.005),
            1,
            5 * 0.625 + 2 * 0.125 + 3 * 0.40 + 0.20 + 0.005 * 13.3334,
        ),
        # the same totals over 1000 runs: a thousandth of it per run
        (
            Usage(wru=5000, rru=2000, sqs_requests=3000, lambda_invocations=1000, lambda_gb_seconds=5),
            1000,
            5 * 0.625 + 2 * 0.125 + 3 * 0.40 + 0.20 + 0.005 * 13.3334,
        ),
        (Usage(), 10, 0.0),
    ],
)
def test_cost_per_million_runs_scales_per_run_usage(usage: Usage, runs: int, expected_total: float):
    # Given total usage over some runs / When priced per million runs / Then it is per-run usage x 1e6
    assert cost_per_million_runs(usage, runs).total == pytest.approx(expected_total)


def test_cost_per_million_runs_refuses_zero_runs():
    # Given no runs / When priced per run / Then that is an error, not a division by zero or a free run
    with pytest.raises(ValueError):
        cost_per_million_runs(Usage(wru=1), 0)


@pytest.mark.parametrize(
    ("durations", "memory_mb", "expected_gb_s"),
    [
        ([0.010], 1024, 0.010),
        ([0.010], 512, 0.005),
        ([0.0101], 1024, 0.011),  # rounded up to the next millisecond
        ([0.0004, 0.0004], 1024, 0.002),  # each invocation rounds on its own
        ([0.001], 128, 0.000125),
        ([], 512, 0.0),
    ],
)
def test_lambda_duration_is_billed_per_started_millisecond(durations, memory_mb, expected_gb_s):
    # Given invocation durations and a memory size / When converted / Then GB-seconds as Lambda bills
    assert billed_gb_seconds(durations, memory_mb) == pytest.approx(expected_gb_s)


@pytest.mark.parametrize(
    ("size", "writes"),
    [(0, 1), (1, 1), (1024, 1), (1025, 2), (3000, 3), (4096, 4)],
)
def test_write_units_are_per_started_kilobyte(size: int, writes: int):
    # Given an item of `size` bytes / When written / Then one WRU per started KB (minimum one)
    assert write_units(size) == writes


@pytest.mark.parametrize(
    ("size", "consistent", "reads"),
    [(0, True, 1.0), (4096, True, 1.0), (4097, True, 2.0), (1000, False, 0.5), (8193, False, 1.5)],
)
def test_read_units_are_per_started_4kb_halved_when_eventually_consistent(size, consistent, reads):
    # Given a read of `size` bytes / When billed / Then 4 KB units, half for eventually consistent reads
    assert read_units(size, consistent) == reads


def test_custom_prices_are_applied():
    # Given a different price sheet / When priced / Then its prices are used
    prices = Prices(dynamodb_wru=1.0, dynamodb_rru=0, sqs_request=0, lambda_request=0, lambda_gb_second=0)
    assert cost_of(Usage(wru=7, rru=100), prices).total == 7.0
