"""The idle figure on a small run (5 monthly crons, one simulated hour): registered jobs add no request
to the ticks and sweeps, the figures are consistent, and ``jobsched bench --idle --json`` prints them."""

from __future__ import annotations

import json

import pytest

from jobsched.bench.idle import IdleConfig, run_idle
from jobsched.cli import main as cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def idle() -> dict:
    return run_idle(IdleConfig(jobs=5, hours=1))


def test_registered_jobs_add_no_request_between_their_occurrences(idle):
    """Given 5 monthly crons and an hour of ticks and sweeps with none due / Then the hour with the jobs
    made exactly the requests of the hour without them, and no run was created."""
    assert idle["extra_requests_per_day"] == {}
    assert idle["measured_requests_per_day"] == idle["baseline_requests_per_day"]
    assert idle["per_million_jobs"]["usd_requests_per_month"] == 0
    assert idle["goal_met"] is True and idle["runs_created"] == 0


def test_the_stack_cost_is_the_ticks_and_sweeps_of_a_day_scaled_to_a_month(idle):
    """Given the baseline hour (scaled to a day) / Then the stack's monthly requests are 30 days of it,
    ticks every minute per shard and sweeps every 5 minutes."""
    day = sum(n for ops in idle["baseline_requests_per_day"].values() for n in ops.values())
    assert idle["stack"]["requests_per_month"] == pytest.approx(30 * day)
    assert idle["ticks_per_day"] == 60 * idle["shards"] and idle["sweeps_per_day"] == 12
    assert idle["stack"]["lambda_invocations_per_month"] == pytest.approx(30 * 24 * (60 * 4 + 12))


def test_storage_is_priced_per_job_item_and_index_entry(idle):
    """Given the stored jobs / Then every job has an item and a due-index entry, priced at $0.25/GB-month."""
    storage = idle["storage"]
    assert storage["items"] == 5
    assert storage["bytes_per_job"] == pytest.approx(
        storage["item_bytes_per_job"] + storage["due_index_bytes_per_job"], abs=0.2
    )
    gb = storage["bytes_per_job"] * 1_000_000 / 2**30
    assert storage["usd_per_million_jobs_per_month"] == pytest.approx(gb * 0.25, abs=1e-3)


def test_the_cli_prints_the_idle_figure_as_one_json_object(idle, monkeypatch, capsys):
    """When ``jobsched bench --idle --idle-jobs 5 --idle-hours 1 --json`` runs / Then it asks for that
    run (the module's, taken instead of simulating it again) and its last line is the figures under
    ``idle``, exit 0."""
    from jobsched.bench import idle as idle_module

    asked: list[IdleConfig] = []
    monkeypatch.setattr(idle_module, "run_idle", lambda config: asked.append(config) or idle)
    assert cli.main(["bench", "--idle", "--idle-jobs", "5", "--idle-hours", "1", "--json"]) == 0
    assert asked == [IdleConfig(jobs=5, hours=1, shards=4)]
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures == {"idle": idle} and "usd_requests_per_million_jobs_per_month" in figures["idle"]


def test_bad_idle_options_are_refused(capsys):
    """When --idle-hours is out of range / Then a clear error, exit 2."""
    assert cli.main(["bench", "--idle", "--idle-hours", "25"]) == 2
    assert "--idle-hours" in capsys.readouterr().err
