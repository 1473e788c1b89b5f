"""The cancel benchmark's shape (``jobsched.bench.cancel``): its figures come from real runs."""

from __future__ import annotations

from jobsched.bench.cancel import LatencyResult, run_cost


def test_latency_figures_are_nearest_rank_percentiles_held_against_the_goal():
    """Given 20 measured cancels, one of them 2.5 s late for the handler,
    When the result is reported,
    Then p95 is the 19th value, the goal is judged on it and on the API's worst case."""
    seen = [0.1 * i for i in range(1, 20)] + [2.5]
    result = LatencyResult(runs=20, handler_seen=seen, api_cancelled=[x + 0.1 for x in seen])

    figures = result.to_dict()

    assert figures["handler_seen_seconds"] == {"p50": 1.0, "p95": 1.9, "max": 2.5}
    assert figures["api_cancelled_seconds"]["max"] == 2.6
    assert figures["goal_met"] is True
    assert LatencyResult(runs=1, handler_seen=[2.1], api_cancelled=[2.2]).to_dict()["goal_met"] is False


def test_the_cost_part_meters_one_read_per_second_of_running_time():
    """Given the deployed worker over moto and a demo.sleep of 2.5 real seconds,
    When the cost part meters it,
    Then the watch made two reads (at 1 s and 2 s), no heartbeat fell due, and the price is per minute."""
    figures = run_cost(2.5)

    assert figures["outcome"] == "succeeded"
    assert figures["requests"] == {"dynamodb.UpdateItem": 2, "dynamodb.BatchGetItem": 2}
    assert figures["heartbeat_writes_per_minute"] == 0.0
    assert 0 < figures["usd_per_million_running_minutes"]["cancel_watch"] < 7.5
