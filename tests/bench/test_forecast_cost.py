"""The forecast's cost (decision 0054), measured with the real dispatcher and forecast on moto: reads
metered, the capacity function priced, divided by the runs the same minutes dispatched."""

from __future__ import annotations

from jobsched.bench.forecast_cost import forecast_cost_text, run_forecast_cost


def test_the_forecast_costs_under_one_percent_of_the_goal_at_the_benchmarks_volume():
    # Given 100 per-minute jobs for 10 minutes, the forecast read each minute as the capacity tick does
    figures = run_forecast_cost(jobs=100, minutes=10)
    # Then it was rebuilt every 5 minutes (reused in between) and read only the index, ledger and jobs
    assert figures["forecast_reads"] == 2
    assert set(figures["requests"]) == {"dynamodb.Query", "dynamodb.BatchGetItem"}
    # and costs under 1 % of the goal per run, the break-even volume below the benchmark's 100 a minute
    assert 0 < figures["share_of_goal"] < 0.01
    assert figures["break_even_runs_per_minute"] < 100
    assert "USD per million runs" in forecast_cost_text(figures)
