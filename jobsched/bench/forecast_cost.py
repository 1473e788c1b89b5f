"""The forecast's cost per run (decision 0054; issue 31: at most +1 % of a run's cost).

The real dispatcher and the capacity service's forecast run against moto on a fake clock: ``jobs``
per-minute cron jobs, one tick per shard a minute, and a forecast read each minute as the capacity
function reads it (:func:`jobsched.compose.pipeline.forecast_service_from_settings`, which rebuilds
the forecast every ``reuse_seconds`` and reuses it in between; its job schedules are cached for 15
minutes). Every DynamoDB call of the forecast is metered (:class:`jobsched.aws.sizing.Meter`: read
units from item sizes and consistency); the capacity function's own invocation (one a minute) is priced
at Lambda's request price and its duration modelled as the aws estimate does: each call's stated
latency (:class:`jobsched.bench.aws_estimate.Latency`, DynamoDB 5 ms) at the function's memory. The
sum is divided by the runs those minutes dispatched: the cost per run it adds, with the break-even
volume where it is 1 % of the goal (:data:`jobsched.bench.aws_estimate.GOAL_USD_PER_MILLION`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jobsched.aws.clients import Clients
from jobsched.aws.metering import Meter
from jobsched.bench.aws_estimate import GOAL_USD_PER_MILLION, Latency
from jobsched.bench.bindings import BENCH_TENANT
from jobsched.bench.environment import REGION, bench_environment
from jobsched.bench.evidence import register_bench_handler
from jobsched.bench.pricing import MILLION, US_EAST_1, Prices
from jobsched.compose.pipeline import (
    dispatcher_from_settings,
    forecast_service_from_settings,
    job_service_from_settings,
)
from jobsched.core.clock import FakeClock
from jobsched.runtime import resources
from jobsched.runtime.settings import Settings

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
#: The capacity function's memory (MB) its modelled duration is priced at.
CAPACITY_MEMORY_MB = 256


def run_forecast_cost(
    jobs: int = 100,
    minutes: int = 10,
    *,
    shards: int = resources.DEFAULT_SHARDS,
    latency: Latency | None = None,
    prices: Prices = US_EAST_1,
) -> dict[str, Any]:
    """The forecast's figures (see the module docstring)."""
    latency = latency or Latency()
    clock = FakeClock(START - timedelta(seconds=30))
    meter = Meter()
    with bench_environment(shards, clock):
        settings = Settings.from_env()
        clients = Clients(region_name=REGION)
        service = job_service_from_settings(settings, clients, meter=Meter())
        spec = {
            "name": "forecast",
            "schedule": "* * * * *",
            "target": {"handler": register_bench_handler("summary")},
        }
        for _ in range(jobs):
            service.create(BENCH_TENANT, spec, clock.now())
        dispatcher = dispatcher_from_settings(settings, clients, owner="forecast", clock=clock)
        forecasts = forecast_service_from_settings(settings, clients, meter=meter)
        reads = 0
        for minute in range(minutes):
            clock.set(START + timedelta(minutes=minute))
            for shard in range(shards):
                dispatcher.dispatch_shard(shard, clock.now(), shards)
            clock.set(START + timedelta(minutes=minute, seconds=5))
            before = sum(meter.requests.values())
            built = forecasts.forecast(clock.now())
            reads += sum(meter.requests.values()) > before
        forecast_total = built.total
    runs = jobs * minutes
    rru = sum(meter.rcu.values())
    calls = sum(meter.requests.values())
    gb_seconds = calls * latency.dynamodb * CAPACITY_MEMORY_MB / 1024  # the calls' latency only
    usd = {
        "dynamodb_reads": rru * prices.dynamodb_rru,
        "lambda_requests": minutes * prices.lambda_request,
        "lambda_duration": gb_seconds * prices.lambda_gb_second,
    }
    per_million = {k: v / runs * MILLION for k, v in usd.items()}
    total = sum(per_million.values())
    fixed_per_minute = sum(usd.values()) / minutes
    return {
        "jobs": jobs,
        "minutes": minutes,
        "runs": runs,
        "forecast_reads": reads,
        "requests": dict(meter.requests),
        "rru": round(rru, 2),
        "forecast_runs_last": forecast_total,
        "usd_per_million_runs": {k: round(v, 4) for k, v in per_million.items()} | {"total": round(total, 4)},
        "share_of_goal": round(total / GOAL_USD_PER_MILLION, 4),
        # the runs a minute at which the same minutes' cost is 1 % of the goal per run
        "break_even_runs_per_minute": round(fixed_per_minute / (0.01 * GOAL_USD_PER_MILLION / MILLION)),
    }


def forecast_cost_text(figures: dict[str, Any]) -> str:
    usd = figures["usd_per_million_runs"]
    return (
        f"  forecast: {usd['total']:.4f} USD per million runs at {figures['jobs']} per-minute jobs "
        f"({figures['share_of_goal'] * 100:.2f} % of the {GOAL_USD_PER_MILLION:.2f} goal; reads "
        f"{usd['dynamodb_reads']:.4f}, capacity function "
        f"{usd['lambda_requests'] + usd['lambda_duration']:.4f}); "
        f"1 % of the goal from {figures['break_even_runs_per_minute']} runs a minute"
    )
