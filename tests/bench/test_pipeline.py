"""The cost benchmark end to end on a small run (20 runs asked: 4 per-minute jobs, the window rounded up to
one 15-minute planning cycle of the default 900 s enqueue horizon: 60 runs).

These tests check outcomes and consistency of the figures, never timings: the run is executed once
(module fixture) through the real dispatcher and worker handlers in moto.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jobsched.bench import pipeline
from jobsched.bench.pipeline import PipelineConfig, PipelineResult, bench_payload, run_pipeline
from jobsched.bench.pricing import cost_per_million_runs
from jobsched.cli import main as cli
from jobsched.core.messages import payload_size

pytestmark = pytest.mark.slow

REQUIRED = (
    "runs",
    "succeeded",
    "duplicates",
    "lost",
    "wru",
    "rru",
    "sqs_requests",
    "lambda_invocations",
    "usd_per_million_runs",
    "breakdown",
)


@pytest.fixture(scope="module")
def result() -> PipelineResult:
    return run_pipeline(PipelineConfig(runs=20, jobs=4))


@pytest.fixture(scope="module")
def figures(result: PipelineResult) -> dict:
    return result.to_dict()


@pytest.fixture(scope="module")
def estimate(figures: dict) -> dict:
    """The AWS estimate of these figures, simulated once (at the headline scale only)."""
    from jobsched.bench.aws_estimate import run_estimate

    return run_estimate(figures, scale=0)


@pytest.fixture
def computed_estimate(estimate, monkeypatch):
    """`jobsched bench` takes the estimate computed above instead of simulating it again."""
    from jobsched.bench import aws_estimate

    monkeypatch.setattr(aws_estimate, "run_estimate", lambda figures, scale: estimate)
    return estimate


def test_every_run_due_succeeds_exactly_once(figures, result):
    # Given 20 cron runs asked, the window rounded up to one planning cycle (4 jobs x 15 minutes), through
    # dispatcher -> queue -> worker / Then all succeeded, none twice, none lost
    assert (figures["runs"], figures["succeeded"]) == (60, 60)
    assert figures["setup"]["planning_cycle_minutes"] == 15 == figures["setup"]["warm_up_minutes"]
    assert figures["duplicates"] == 0
    assert figures["lost"] == 0, result.not_succeeded


def test_every_figure_per_run_is_positive(figures):
    # Given the run / Then each run consumed writes, reads, SQS requests, invocations and duration
    keys = ("wru", "rru", "sqs_requests", "lambda_invocations", "lambda_gb_seconds", "usd_per_million_runs")
    for key in keys:
        assert figures[key] > 0, key


def test_totals_agree_with_the_per_function_breakdown(figures):
    # Given the per-function breakdown / When summed / Then it matches the per-run totals
    breakdown = figures["breakdown"]
    operations = [op for entry in breakdown.values() for op in entry["operations"].values()]
    assert sum(op["wru"] for op in operations) == pytest.approx(figures["wru"], abs=1e-3)
    assert sum(op["rru"] for op in operations) == pytest.approx(figures["rru"], abs=1e-3)
    assert sum(e["sqs_billed_requests"] for e in breakdown.values()) == pytest.approx(
        figures["sqs_requests"], abs=1e-3
    )
    invocations = sum(e.get("invocations", 0) for e in breakdown.values())
    assert invocations == pytest.approx(figures["lambda_invocations"], abs=1e-3)
    assert set(breakdown) == {"dispatcher", "worker", "sweeper", "event_source_mapping"}


def test_dollars_are_the_priced_usage_and_add_up(figures, result):
    # Given the usage / When priced per million runs / Then the reported total is that price, summed
    expected = cost_per_million_runs(result.usage, result.succeeded)
    lines = figures["usd_breakdown_per_million_runs"]
    assert figures["usd_per_million_runs"] == pytest.approx(expected.total, abs=1e-3)
    assert lines["total"] == pytest.approx(sum(v for k, v in lines.items() if k != "total"), abs=1e-3)


def test_the_runs_due_in_a_minute_reach_the_worker_as_one_batch(figures):
    # Given 4 jobs due each minute / Then one worker invocation per minute carries all four: 0.25 per run
    assert figures["breakdown"]["worker"]["invocations"] == pytest.approx(0.25)


def test_the_window_creates_the_runs_it_executes(figures):
    # Given a window of whole enqueue cycles / Then the dispatcher created one run item per run executed
    assert figures["breakdown"]["dispatcher"]["operations"]["dynamodb.PutItem"]["requests"] == pytest.approx(
        1.0
    )


def test_every_aws_call_of_the_functions_went_through_the_meter(figures):
    # Given the raw API call counter / Then no function made a call the meter did not price
    assert figures["unmetered_calls"] == {}


@pytest.mark.parametrize(
    ("lookahead", "horizon", "cycles"),
    [
        (60, 900, (15, 15)),  # the defaults: 15 runs per advance (the batch and the horizon agree)
        (60, 300, (5, 5)),  # the horizon bounds it
        (60, 60, (1, 1)),  # no horizon beyond the look-ahead: an advance a minute
        (60, 330, (6, 5)),  # the first dispatch (30 s before the start) reaches one run further
        (120, 600, (10, 9)),  # a 2-minute look-ahead: the tick 2 minutes before the cursor advances it
    ],
)
def test_the_window_follows_the_planning_cycle_of_any_horizon(lookahead, horizon, cycles):
    # Given a look-ahead and an enqueue horizon / When the per-minute job's planning is computed with the
    # dispatcher's own rule / Then the first dispatch and each later advance queue that many runs
    start = pipeline.DEFAULT_START
    assert pipeline.planning_cycles(lookahead, horizon, start, start - timedelta(seconds=30)) == cycles


def test_the_payload_is_exactly_the_configured_size():
    # Given a 1 KB payload request / Then its compact JSON is 1024 bytes
    assert payload_size(bench_payload(1024)) == 1024


def test_bench_json_prints_one_object_on_the_last_line(result, computed_estimate, monkeypatch, capsys):
    # Given the benchmark (the result computed above, not recomputed)
    monkeypatch.setattr(pipeline, "run_pipeline", lambda config: result)
    # When `jobsched bench --no-lag --json` runs (the AWS estimate simulated at the headline only)
    status = cli.main(["bench", "--runs", "20", "--jobs", "4", "--no-lag", "--json", "--estimate-scale", "0"])
    # Then it succeeds and the last stdout line is the JSON object with the fields, the AWS
    # estimate before and after the alignment of decision 0032 among them
    out = capsys.readouterr().out.strip().splitlines()
    data = json.loads(out[-1])
    assert status == 0
    assert all(key in data for key in REQUIRED)
    estimate = data["aws_estimate"]
    assert set(estimate["usd_per_million_runs"]) == {"before", "after"}
    assert estimate["early_arrival"]["after"]["runs_early"] == 0
    assert set(estimate["scaled"]) == {"staggered"}
    assert estimate == computed_estimate


def test_bench_text_report_names_the_cost_and_the_breakdown(result, computed_estimate, monkeypatch, capsys):
    # Given the benchmark / When run without --json / Then a readable report with dollars and functions
    monkeypatch.setattr(pipeline, "run_pipeline", lambda config: result)
    assert cli.main(["bench", "--runs", "20", "--jobs", "4", "--no-lag", "--estimate-scale", "0"]) == 0
    text = capsys.readouterr().out
    assert "USD per million runs" in text and "dispatcher" in text and "worker" in text
    assert "AWS estimate, USD per million runs: before" in text and "early arrival after" in text


def test_bench_rejects_a_payload_over_the_limit(capsys):
    # Given a payload larger than a job may have / Then a usage error, nothing run
    assert cli.main(["bench", "--payload-bytes", "70000", "--no-lag"]) == 2
    assert "--payload-bytes" in capsys.readouterr().err


def test_the_headline_handler_returns_a_small_output_so_each_worker_write_is_one_unit(figures):
    # Given the headline run (bench.summary: a small result from a 1 KB payload)
    worker = figures["breakdown"]["worker"]["operations"]["dynamodb.UpdateItem"]
    # Then the claim and the completion cost 1 WRU each, plus the invocation's usage write (one per
    # tenant and day per invocation, shared by the runs of its batch: under 1 per run)
    assert figures["setup"]["handler"] == "bench.summary"
    assert worker["requests"] == pytest.approx(worker["wru"])
    assert 2.0 < worker["wru"] < 3.0


def test_the_echo_variant_is_measured_beside_it_and_its_1_kb_output_costs_one_more_unit(figures):
    # Given the variant run with bench.echo (returns its 1 KB payload, stored on the run item)
    echo = figures["variants"]["echo_output"]
    # Then it ran every run once, and the completion write costs 2 WRU: 3 for the worker, 1 more per run
    assert echo["handler"] == "bench.echo"
    assert (echo["succeeded"], echo["duplicates"], echo["lost"]) == (60, 0, 0)
    headline = figures["breakdown"]["worker"]["operations"]["dynamodb.UpdateItem"]["wru"]
    assert 3.0 < echo["worker_operations"]["dynamodb.UpdateItem"]["wru"] < 4.0
    assert echo["worker_operations"]["dynamodb.UpdateItem"]["wru"] == pytest.approx(headline + 1.0, abs=0.3)
    # and the whole pipeline pays that one unit more per run. Not to the thousandth: the totals hold
    # writes that follow how long the invocations take in real time on the machine (such as the fair
    # share's lazy registration, decision 0057: an invocation still running after 0.5 s registers, then
    # leaves), so two runs of 60 may differ by a few writes (a loaded CI run: 3, 0.05 per run); one
    # unit more is still told apart from none or two.
    assert echo["wru"] == pytest.approx(figures["wru"] + 1.0, abs=0.1)
    assert echo["usd_per_million_runs"] > figures["usd_per_million_runs"]


def _noisy(result):
    """A run_pipeline that prints an EMF line and warns, as the functions do, then returns ``result``."""

    def run(config):
        import warnings

        print('{"_aws": {"CloudWatchMetrics": []}, "service": "worker"}')
        warnings.warn("No application metrics to publish", stacklevel=1)
        return result

    return run


def test_bench_shows_the_report_alone_without_metrics_or_warnings(result, monkeypatch, capsys):
    """Given functions that print metrics and warn while the benchmark runs
    When `jobsched bench` runs without --verbose
    Then stdout is the report alone and stderr is empty"""
    import warnings

    monkeypatch.setattr(pipeline, "run_pipeline", _noisy(result))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert cli.main(["bench", "--runs", "20", "--jobs", "4", "--no-lag", "--no-estimate"]) == 0
    captured = capsys.readouterr()
    assert "_aws" not in captured.out
    assert "USD per million runs" in captured.out
    assert captured.err == ""
    assert [str(w.message) for w in seen] == []


def test_bench_verbose_shows_the_metrics_on_stderr(result, monkeypatch, capsys):
    import warnings

    monkeypatch.setattr(pipeline, "run_pipeline", _noisy(result))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert (
            cli.main(["bench", "--runs", "20", "--jobs", "4", "--no-lag", "--no-estimate", "--verbose"]) == 0
        )
    captured = capsys.readouterr()
    assert '"_aws"' in captured.err and "_aws" not in captured.out
    assert [str(w.message) for w in seen] == ["No application metrics to publish"]


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_the_simulation_runs_on_one_cpu_its_threads_too_and_the_caller_s_cpus_come_back():
    import os
    import threading

    before = os.sched_getaffinity(0)
    seen: list[set[int]] = []
    with pipeline.on_one_cpu() as cpus:
        inside = os.sched_getaffinity(0)
        thread = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        thread.start()
        thread.join()
    assert cpus == [min(before)] and inside == {min(before)} and seen == [{min(before)}]
    assert os.sched_getaffinity(0) == before
    with pipeline.on_one_cpu(enabled=False) as cpus:
        assert os.sched_getaffinity(0) == before
    assert cpus == sorted(before)


def test_the_figures_say_which_cpus_the_simulation_ran_on(figures):
    assert figures["setup"]["cpus"] and all(isinstance(cpu, int) for cpu in figures["setup"]["cpus"])


@pytest.fixture(scope="module")
def counted() -> PipelineResult:
    """A run at 20 jobs (a 15-minute window: 300 runs), so the sweeper's fixed writes every 5 minutes
    are spread as in a deployment with more than a handful of jobs (decision 0059)."""
    return run_pipeline(PipelineConfig(runs=100, jobs=20, echo_variant=False))


def test_the_tenants_usage_adds_up_to_the_measured_cost_within_2_percent(figures, counted):
    """Given the benchmark's window (its usage items read when the window starts and when it ends),
    Then the tenants' estimated_usd added in it is the measured cost of the window within 2 %, at
    both scales, and the report prints the comparison."""
    from jobsched.bench.report import pipeline_text

    for run in (figures, counted.to_dict()):
        attribution = run["usage_attribution"]
        assert set(attribution["tenants"]) == {"bench"}
        assert attribution["measured_usd_per_million_runs"] == pytest.approx(
            run["usd_per_million_runs"], abs=1e-3
        )
        assert abs(attribution["difference_pct"]) <= 2.0
        assert "usage per tenant (decision 0059): tenants' estimated_usd" in pipeline_text(run)
    assert counted.attribution_ok()


def test_the_deployment_row_is_reported_apart_from_the_tenants(counted):
    """Given the same run, Then the sweeper's estimate of the mappings' empty polls (decision 0059
    amended) is on the deployment row, reported beside the tenants and not in their sum."""
    from jobsched.bench.report import pipeline_text

    attribution = counted.to_dict()["usage_attribution"]
    assert attribution["deployment_usd_per_million_runs"] > 0
    assert "@deployment" not in attribution["tenants"]
    assert "the deployment row (estimated empty polls" in pipeline_text(counted.to_dict())


def test_counting_every_function_raises_the_cost_per_run_by_at_most_1_percent(counted):
    """Given the same run, Then the dispatcher's and the sweeper's usage writes (one per tick or sweep
    that served the tenant) and the seconds they took cost at most 1 % of the rest of a run's cost,
    measured from the writes the meters saw, not assumed."""
    attribution = counted.to_dict()["usage_attribution"]
    writes = attribution["counting_writes"]
    assert writes["dispatcher"] >= 1 and writes["sweeper"] >= 1  # they counted
    assert writes["worker"] >= counted.setup["worker_batches"] - 1  # one per batch (a tenant, a day)
    assert 0 < attribution["counting_raise_pct"] <= 1.0
    assert attribution["counting_raise_within_limit"]
