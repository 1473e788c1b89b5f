"""The DAG-workflow benchmark end to end on a small run (1 per-minute diamond, 5 workflow runs asked:
one 15-minute planning cycle of the 900 s enqueue horizon measured after a 15-minute warm-up), with
the plain-run baseline; and the CLI's JSON keys, printed from that run (the CLI's smallest run, 1
asked, is rounded up to the same cycle: a second run would measure the same thing again)."""

from __future__ import annotations

import json

import pytest

from jobsched.bench import workflow
from jobsched.bench.workflow import WorkflowBenchConfig, diamond, run_workflow_bench
from jobsched.core.dag import parse_workflow

pytestmark = pytest.mark.slow(seconds=35)


@pytest.fixture(scope="module")
def figures() -> dict:
    return run_workflow_bench(WorkflowBenchConfig(workflow_runs=5, workflows=1))


def test_the_diamond_has_ten_nodes_with_the_sink_after_all_eight_middle_nodes():
    """Given the benchmark's workflow, Then it is root -> m1..m8 -> sink."""
    flow = parse_workflow({"nodes": diamond("bench.summary", {})})
    assert flow.ids[0] == "root" and flow.ids[-1] == "sink" and len(flow.ids) == 10
    assert len(flow.node("sink").depends_on) == 8


def test_every_workflow_run_succeeds_with_no_node_run_twice_or_lost(figures):
    """Given the small benchmark (its window rounded up to one 15-minute planning cycle), Then every
    workflow run due succeeded, each node once."""
    assert figures["workflow_runs"] == 15 and figures["workflow_runs_succeeded"] == 15
    assert figures["nodes_succeeded"] == 150
    assert figures["nodes_run_twice"] == 0 and figures["lost"] == 0


def test_per_node_figures_are_the_workflow_run_figures_over_ten(figures):
    """Given the figures, Then per node = per workflow run / 10, and the prices follow."""
    for key in ("wru", "rru", "sqs_requests"):
        assert figures["per_node"][key] == pytest.approx(figures["per_workflow_run"][key] / 10, abs=1e-3)
    assert figures["usd_per_million_nodes"] == pytest.approx(
        figures["usd_per_million_workflow_runs"] / 10, abs=1e-3
    )
    assert figures["usd_per_million_nodes"] > 0


def test_the_cli_prints_one_json_object_with_the_documented_keys(capsys, monkeypatch, figures):
    """Given `jobsched bench --workflow --json` on the smallest run, Then it asks the benchmark for
    that run (1 workflow run of 1 workflow, the baseline included), and the last line is one JSON
    object with the documented keys. The run it gets is the module's (:func:`figures`, the same
    planning cycle, baseline included), not a second one."""
    from jobsched.cli import main as cli

    asked: list[WorkflowBenchConfig] = []

    def the_modules_run(config: WorkflowBenchConfig) -> dict:
        asked.append(config)
        return figures

    monkeypatch.setattr(workflow, "run_workflow_bench", the_modules_run)
    code = cli.main(["bench", "--workflow", "--workflow-runs", "1", "--workflows", "1", "--json"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    data = json.loads(last)
    assert asked == [WorkflowBenchConfig(workflow_runs=1, workflows=1)]
    assert code == 0
    for key in (
        "workflow_runs",
        "workflow_runs_succeeded",
        "nodes_per_workflow_run",
        "nodes_succeeded",
        "nodes_run_twice",
        "lost",
        "per_workflow_run",
        "per_node",
        "usd_per_million_workflow_runs",
        "usd_per_million_nodes",
        "usd_per_million_nodes_without_lambda_duration",
        "run_baseline",
        "node_to_run_cost_ratio",
        "node_to_run_cost_ratio_without_lambda_duration",
        "goal_node_to_run_cost_ratio",
        "goal_met",
        "setup",
    ):
        assert key in data, key
