"""What the container pool costs (infra/containers.py): Fargate's list prices, multiplied out.

Pure arithmetic, no AWS call, no clock, like :mod:`jobsched.bench.pricing`. The prices are us-east-1
list prices for Linux/arm64 tasks, as read on 2026-12-05 from the AWS Fargate pricing page
(https://aws.amazon.com/fargate/pricing/, also quoted by https://www.vantage.sh/blog/fargate-pricing):
$0.03238 per vCPU-hour and $0.00356 per GB-hour, billed per second with a one-minute minimum from the
start of the image pull until the task stops. Fargate Spot is published as "up to a 70% discount off
the Fargate price" (the same page; the ECS API reference: FARGATE_SPOT runs Linux/ARM64 tasks on
platform 1.4.0 or later); its price moves with spare capacity, so :data:`SPOT_DISCOUNT` is the best
case. A task in the pool's default network holds a public IPv4 address: $0.005 per hour (Amazon VPC
pricing, https://aws.amazon.com/vpc/pricing/).

docs/performance.md ("Container pool cost") prints :func:`cost_table`; ``python -m
jobsched.bench.container_cost`` prints it again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from jobsched.core.prices import MILLION, US_EAST_1, Prices

#: Seconds Fargate bills at least, per task.
MINIMUM_BILLED_SECONDS = 60
#: The best case of Fargate Spot's published discount ("up to 70%").
SPOT_DISCOUNT = 0.70


@dataclass(frozen=True)
class FargatePrices:
    """USD list prices, us-east-1, Linux/arm64 (2026-12-05)."""

    vcpu_hour: float = 0.03238
    gb_hour: float = 0.00356
    public_ipv4_hour: float = 0.005
    spot_discount: float = SPOT_DISCOUNT


US_EAST_1_ARM64 = FargatePrices()


@dataclass(frozen=True)
class Task:
    """One container task's size (``container_cpu`` CPU units, ``container_memory`` MiB), whether it
    runs on Spot and holds a public IP (the default network), and how many runs it holds at once."""

    cpu_units: int = 1024
    memory_mib: int = 2048
    spot: bool = False
    public_ip: bool = True
    concurrency: int = 1

    def hourly(self, prices: FargatePrices = US_EAST_1_ARM64) -> float:
        """USD an hour of this task costs: compute (Spot-discounted when ``spot``) plus its public IP."""
        compute = self.cpu_units / 1024 * prices.vcpu_hour + self.memory_mib / 1024 * prices.gb_hour
        if self.spot:
            compute *= 1 - prices.spot_discount
        return compute + (prices.public_ipv4_hour if self.public_ip else 0.0)


def billed_seconds(seconds: float) -> int:
    """The seconds Fargate bills for a task that ran ``seconds``: whole seconds, at least a minute."""
    return max(MINIMUM_BILLED_SECONDS, math.ceil(max(0.0, seconds) - 1e-9))


def run_cost(run_seconds: float, task: Task = Task(), prices: FargatePrices = US_EAST_1_ARM64) -> float:
    """USD of one run of ``run_seconds`` on a busy pool: its share of a task's time (a task holds
    ``task.concurrency`` runs at once), with no idle time and no start-up counted."""
    return run_seconds / 3600 * task.hourly(prices) / task.concurrency


def burst_overhead(
    tasks: int,
    *,
    start_seconds: float = 60.0,
    idle_minutes: int = 5,
    task: Task = Task(),
    prices: FargatePrices = US_EAST_1_ARM64,
) -> float:
    """USD a scale-out from 0 adds to the runs' own time, per burst: each of ``tasks`` tasks is billed
    while it starts (image pull; ``start_seconds``) and after the queue empties until the
    ``ScaleInWhenIdle`` alarm (``idle_minutes`` minutes of nothing visible or in flight, plus up to a
    minute for the metric and the scaling action) stops it."""
    idle_seconds = start_seconds + (idle_minutes + 1) * 60
    return tasks * billed_seconds(idle_seconds) / 3600 * task.hourly(prices)


def lambda_run_cost(run_seconds: float, memory_mb: int = 512, gb_second: float = 0.0000133334) -> float:
    """USD of the same run on the Lambda pools (arm64 duration only; a run there is at most 900 s):
    for comparison with :func:`run_cost`."""
    return run_seconds * memory_mb / 1024 * gb_second


#: The runs docs/performance.md prices: a Lambda-sized run, and three only the container pool can take.
RUN_MINUTES = (10, 40, 120, 720)


def cost_table(prices: FargatePrices = US_EAST_1_ARM64) -> list[tuple[str, str, str, str, str]]:
    """Rows (run length, Lambda 512 MB, Fargate 1 vCPU/2 GB, the same on Spot, per million runs on
    Fargate) for :data:`RUN_MINUTES`, in USD."""
    on_demand, spot = Task(), Task(spot=True)
    rows = []
    for minutes in RUN_MINUTES:
        seconds = minutes * 60
        lam = f"{lambda_run_cost(seconds):.4f}" if seconds <= 900 else "— (over 900 s)"
        fargate = run_cost(seconds, on_demand, prices)
        rows.append(
            (
                f"{minutes} min",
                lam,
                f"{fargate:.4f}",
                f"{run_cost(seconds, spot, prices):.4f}",
                f"{fargate * 1_000_000:,.0f}",
            )
        )
    return rows


#: The container pool's alarm metrics billed whether or not a task runs (its three scaling alarms of
#: 5 metrics in all and ``OldestMessage-container`` of 2, as deploy.md's alarm figure counts them),
#: at CloudWatch's $0.10 per standard-resolution alarm metric a month.
IDLE_ALARM_METRICS = 7
ALARM_METRIC_MONTH_USD = 0.10


def pool_estimate(
    pipeline: dict[str, Any],
    calls: dict[str, Any],
    worker_wait_gb_seconds_per_run: float,
    *,
    task: Task = Task(),
    prices: FargatePrices = US_EAST_1_ARM64,
    lambda_prices: Prices = US_EAST_1,
) -> dict[str, Any]:
    """The AWS estimate's ``container_pool`` object: the pipeline's runs, priced as if the container
    pool's loop had run them instead of the worker function.

    The requests are the pipeline's measured ones (the loop makes the worker's calls, and its receives
    are the event source mapping's) less the worker's Lambda invocation charges; the worker's modelled
    call time (``calls``: :func:`jobsched.bench.aws_estimate.call_duration`) and its early-arrival wait
    (``worker_wait_gb_seconds_per_run``) become a busy task's time (:func:`run_cost`) instead of Lambda
    GB-seconds; the dispatcher's and the sweeper's Lambda duration stay. Besides the per-run figure:
    what a burst from 0 adds per task and what the pool costs a month at 0 tasks."""
    usd = pipeline["usd_breakdown_per_million_runs"]
    worker = pipeline["breakdown"].get("worker", {})
    worker_mb = float(worker.get("memory_mb") or 512)
    worker_invocations = float(worker.get("invocations") or 0.0)
    worker_gb_s = float(calls["functions"].get("worker", {}).get("gb_seconds_per_run", 0.0))
    busy_seconds = (worker_gb_s + worker_wait_gb_seconds_per_run) / (worker_mb / 1024)
    requests = (
        usd["dynamodb_writes"]
        + usd["dynamodb_reads"]
        + usd["sqs"]
        + max(0.0, usd["lambda_requests"] - worker_invocations * lambda_prices.lambda_request * MILLION)
    )
    other_functions = (calls["gb_seconds_per_run"] - worker_gb_s) * lambda_prices.lambda_gb_second * MILLION
    fargate = run_cost(busy_seconds, task, prices) * MILLION
    total = requests + other_functions + fargate
    return {
        "usd_per_million_runs": round(total, 4),
        "request_priced": round(requests, 4),
        "other_functions_lambda_duration": round(other_functions, 4),
        "fargate_busy_seconds_per_run": round(busy_seconds, 6),
        "fargate_usd_per_million_runs": round(fargate, 4),
        "task": {"cpu_units": task.cpu_units, "memory_mib": task.memory_mib, "spot": task.spot},
        "burst_overhead_usd_per_task": round(burst_overhead(1, task=task, prices=prices), 4),
        "idle_usd_per_month": round(IDLE_ALARM_METRICS * ALARM_METRIC_MONTH_USD, 2),
        "note": "the pipeline's runs on one busy task each (no start-up or idle time); a run's own "
        "handler time costs its share of a task-hour on top (docs/performance.md, Container pool cost)",
    }


def main() -> None:
    print("| run | Lambda 512 MB | Fargate 1 vCPU / 2 GB | on Spot (best case) | Fargate, per million runs |")
    print("|---|---|---|---|---|")
    for row in cost_table():
        print("| " + " | ".join(row) + " |")
    print(f"burst overhead, 1 task: {burst_overhead(1):.4f}; 10 tasks: {burst_overhead(10):.4f}")


if __name__ == "__main__":
    main()
