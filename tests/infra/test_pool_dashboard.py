"""The dashboard's row per pool and the per-pool alarms, read from the synthesized DashboardBody and
alarms: each widget by the metrics it draws and their statistics (issue 31 §5, decision 0056)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.pool_metrics import POOL_FUNCTIONS
from jobsched.runtime import observability as obs
from jobsched.runtime.resources import POOLS
from tests.infra.test_observability import _widgets

NS = obs.NAMESPACE


def _plain(metrics: list[Any]) -> list[tuple[str, str, list[Any]]]:
    """``(namespace, metric name, statistic, dimensions)`` of a widget's plain metrics, in order."""
    out = []
    for m in metrics:
        if isinstance(m[0], str):
            options = m[-1] if isinstance(m[-1], dict) else {}
            dims = m[2:-1] if isinstance(m[-1], dict) else m[2:]
            out.append((m[0], m[1], options.get("stat", "Average"), dims))
    return out


def _by_id(metrics: list[Any]) -> dict[str, tuple[str, str, str, list[Any]]]:
    """The metrics a math expression uses, by their id."""
    return {m[-1]["id"]: p for m, p in zip(_with_ids(metrics), _plain(_with_ids(metrics)), strict=True)}


def _with_ids(metrics: list[Any]) -> list[Any]:
    return [m for m in metrics if isinstance(m[0], str) and isinstance(m[-1], dict) and "id" in m[-1]]


def _expressions(metrics: list[Any]) -> list[str]:
    return [m[0]["expression"] for m in metrics if isinstance(m[0], dict) and "expression" in m[0]]


def _worker(name: str, stat: str) -> tuple[str, str, str, list[Any]]:
    return (NS, name, stat, ["service", "worker"])


@pytest.mark.parametrize("pool", POOLS)
def test_start_lag_and_run_duration_show_the_pools_p50_and_p99(synth, pool):
    # Given the worker's per-pool metrics / Then each pool's lag and duration widgets draw p50 and p99
    widgets = _widgets(synth)
    for title, name in (
        (f"{pool}: start lag (s)", obs.SCHEDULE_LAG),
        (f"{pool}: run duration (s)", obs.RUN_DURATION),
    ):
        metrics, _ = widgets[title]
        metric = obs.pool_metric(name, pool)
        assert _plain(metrics) == [_worker(metric, "p50"), _worker(metric, "p99")]


@pytest.mark.parametrize("pool", POOLS)
def test_success_rate_is_succeeded_over_ended_attempts_in_percent(synth, pool):
    metrics, _ = _widgets(synth)[f"{pool}: success rate (%)"]
    (expression,) = _expressions(metrics)
    assert (
        expression
        == "IF(FILL(ok, 0) + FILL(failed, 0) > 0, 100 * FILL(ok, 0) / (FILL(ok, 0) + FILL(failed, 0)))"
    )
    assert _by_id(metrics) == {
        "ok": _worker(obs.pool_metric(obs.RUNS_SUCCEEDED, pool), "Sum"),
        "failed": _worker(obs.pool_metric(obs.RUNS_FAILED, pool), "Sum"),
    }


@pytest.mark.parametrize("pool", POOLS)
def test_retries_and_dead_letters_are_the_pools_sums(synth, pool):
    metrics, _ = _widgets(synth)[f"{pool}: retries and dead letters"]
    assert _plain(metrics) == [
        _worker(obs.pool_metric(obs.RUNS_RETRIED, pool), "Sum"),
        _worker(obs.pool_metric(obs.RUNS_DEAD_LETTERED, pool), "Sum"),
    ]


@pytest.mark.parametrize(("pool", "ceiling"), [("lambda", 20 + 20 + 5), ("long", 5)])
def test_lambda_pools_utilisation_is_concurrent_executions_over_the_mappings_ceiling(synth, pool, ceiling):
    # Given the default max_concurrency (high 20, default 20, low 5, long 5) / Then utilisation divides
    # the Maximum ConcurrentExecutions of the pool's functions by the sum of its mappings' ceilings
    metrics, tokens = _widgets(synth)[f"{pool}: utilisation (% of ceiling {ceiling})"]
    (expression,) = _expressions(metrics)
    used = _by_id(metrics)
    assert expression == f"100 * ({' + '.join(f'FILL({k}, 0)' for k in sorted(used))}) / {ceiling}"
    functions = synth.stack.functions
    expected = {synth.logical_id(functions[name]) for name in POOL_FUNCTIONS[pool]}
    named = set()
    for namespace, name, stat, dims in used.values():
        assert (namespace, name, stat, dims[0]) == (
            "AWS/Lambda",
            "ConcurrentExecutions",
            "Maximum",
            "FunctionName",
        )
        named.add(tokens[int(dims[1].removeprefix("__TOKEN").removesuffix("__"))]["Ref"])
    assert named == expected


def test_container_utilisation_is_running_tasks_over_container_max_tasks(synth):
    metrics, tokens = _widgets(synth)[
        f"container: utilisation (% of ceiling {synth.stack.config.container_max_tasks})"
    ]
    assert _expressions(metrics) == [f"100 * (FILL(c0, 0)) / {synth.stack.config.container_max_tasks}"]
    ((namespace, name, stat, dims),) = _by_id(metrics).values()
    assert (namespace, name, stat) == ("ECS/ContainerInsights", "RunningTaskCount", "Maximum")
    assert dims[0::2] == ["ClusterName", "ServiceName"]
    service = synth.stack.containers.service
    refs = [tokens[int(v.removeprefix("__TOKEN").removesuffix("__"))] for v in dims[1::2]]
    assert refs[0] == {"Ref": synth.logical_id(service.cluster)}
    assert refs[1] == {"Fn::GetAtt": [synth.logical_id(service), "Name"]}


@pytest.mark.parametrize("pool", POOLS)
def test_forecast_against_capacity_reads_both_names_whoever_emits_them(synth, pool):
    metrics, _ = _widgets(synth)[f"{pool}: forecast against capacity"]
    assert _expressions(metrics) == [
        f"MAX(SEARCH('{{{NS},service}} MetricName=\"{obs.pool_metric(name, pool)}\"', 'Maximum', 60))"
        for name in (obs.FORECAST_CONCURRENCY, obs.POOL_CAPACITY)
    ]


def test_skipped_by_reason_draws_each_reasons_sum_from_the_dispatcher_and_the_workers_budget_skips(synth):
    metrics, _ = _widgets(synth)["Runs skipped by reason (per minute)"]
    assert _plain(metrics) == [
        *((NS, obs.skipped_metric(reason), "Sum", ["service", "dispatcher"]) for reason in obs.SKIP_REASONS),
        (NS, "RunsSkippedBudget", "Sum", ["service", "worker"]),
    ]


def _alarm(synth, name: str) -> dict[str, Any]:
    alarm = synth.stack.observability.alarms[name]
    return synth.template["Resources"][synth.logical_id(alarm)]["Properties"]


@pytest.mark.parametrize("pool", POOLS)
def test_success_rate_alarm_fires_below_the_threshold_for_ten_minutes(synth, pool):
    props = _alarm(synth, f"SuccessRate-{pool}")
    assert (props["ComparisonOperator"], props["Threshold"], props["EvaluationPeriods"]) == (
        "LessThanThreshold",
        95,
        2,
    )
    assert props["TreatMissingData"] == "notBreaching"
    stats = {
        m["Id"]: (m["MetricStat"]["Metric"]["MetricName"], m["MetricStat"]["Stat"], m["MetricStat"]["Period"])
        for m in props["Metrics"]
        if "MetricStat" in m
    }
    assert stats == {
        "ok": (obs.pool_metric(obs.RUNS_SUCCEEDED, pool), "Sum", 300),
        "failed": (obs.pool_metric(obs.RUNS_FAILED, pool), "Sum", 300),
    }


@pytest.mark.parametrize(("pool", "threshold"), [("lambda", 10), ("long", 10), ("container", 300)])
def test_start_lag_alarm_watches_the_pools_p99(synth, pool, threshold):
    props = _alarm(synth, f"StartLagP99-{pool}")
    assert (props["MetricName"], props["ExtendedStatistic"], props["Dimensions"]) == (
        obs.pool_metric(obs.SCHEDULE_LAG, pool),
        "p99",
        [{"Name": "service", "Value": "worker"}],
    )
    assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanThreshold", threshold)


def test_without_a_container_pool_its_utilisation_says_so_instead_of_an_empty_graph():
    # Given a deployment with container_pool=false (no ECS service: nothing to count)
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_

    from infra.config import StackConfig
    from infra.stack import JobschedStack

    app = cdk.App()
    config = StackConfig(container_pool=False)
    stack = JobschedStack(
        app, "Jobsched", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass")
    )
    template = app.synth().get_stack_by_name("Jobsched").template
    (dashboard,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    widgets = json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts))["widgets"]
    # Then the container row has a text widget in the utilisation's place, and no graph of it
    titles = [w["properties"].get("title", "") for w in widgets]
    assert not [t for t in titles if t.startswith("container: utilisation")]
    texts = [w["properties"]["markdown"] for w in widgets if w["type"] == "text"]
    assert any("No container pool" in t and "container_pool=false" in t for t in texts)
    assert stack.containers is None
