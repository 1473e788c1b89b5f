"""The container pool's cost arithmetic (jobsched/bench/container_cost.py): Fargate's list prices
multiplied out, checked against hand-computed figures."""

from __future__ import annotations

import pytest

from jobsched.bench.container_cost import (
    US_EAST_1_ARM64,
    Task,
    billed_seconds,
    burst_overhead,
    cost_table,
    lambda_run_cost,
    run_cost,
)


def test_a_default_task_costs_its_vcpu_and_memory_hours_and_its_public_ip():
    # Given 1 vCPU and 2 GB on arm64 with a public IP: 0.03238 + 2 x 0.00356 + 0.005 USD an hour
    assert Task().hourly() == pytest.approx(0.03238 + 2 * 0.00356 + 0.005)
    # Spot takes its discount off the compute only; a private task pays no IP
    assert Task(spot=True).hourly() == pytest.approx((0.03238 + 2 * 0.00356) * 0.30 + 0.005)
    assert Task(public_ip=False, cpu_units=2048, memory_mib=4096).hourly() == pytest.approx(
        2 * 0.03238 + 4 * 0.00356
    )


@pytest.mark.parametrize(("seconds", "billed"), [(0, 60), (59.2, 60), (60, 60), (60.01, 61), (3600, 3600)])
def test_fargate_bills_whole_seconds_with_a_one_minute_minimum(seconds, billed):
    assert billed_seconds(seconds) == billed


def test_a_run_costs_its_share_of_a_task_hour():
    # Given a 40-minute run on a task holding one run at a time, and on one holding two
    hourly = Task().hourly()
    assert run_cost(2400) == pytest.approx(hourly * 2400 / 3600)
    assert run_cost(2400, Task(concurrency=2)) == pytest.approx(hourly * 2400 / 3600 / 2)


def test_a_burst_pays_each_tasks_start_and_idle_tail():
    # Given 3 tasks started from 0: each billed 60 s of start plus 6 minutes until the idle scale-in
    assert burst_overhead(3) == pytest.approx(3 * (60 + 360) / 3600 * Task().hourly())


def test_the_table_compares_lambda_only_within_its_limit():
    rows = {row[0]: row for row in cost_table()}
    assert rows["10 min"][1] == f"{lambda_run_cost(600):.4f}" == "0.0040"
    assert rows["40 min"][1].startswith("—")
    assert rows["40 min"][2] == f"{run_cost(2400):.4f}"
    assert rows["720 min"][4] == f"{run_cost(43200) * 1_000_000:,.0f}"
    assert US_EAST_1_ARM64.spot_discount == 0.70
