"""The burst figure on a small run (40 daily crons due in the same minute, 10 as the steady state):
every run is enqueued ahead of its due instant through the dispatcher's paging, none is lost or run
twice, and a run of the burst costs no more requests than one of the steady state."""

from __future__ import annotations

import json

import pytest

from jobsched.bench.burst import BurstConfig, run_burst
from jobsched.cli import main as cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def burst() -> dict:
    # Pages of 4 jobs: 40 jobs over 4 shards make every shard's tick page through its due jobs.
    return run_burst(BurstConfig(jobs=40, reference_jobs=10, page_size=4))


def test_every_run_of_the_burst_is_enqueued_ahead_and_runs_once(burst):
    """Given 40 jobs due at 09:00 / When the ticks from 08:55 run / Then all 40 runs were created before
    09:00 (0 late), all succeeded, none ran twice, and no other run exists."""
    assert burst["runs"] == 40 and burst["succeeded"] == 40
    assert burst["enqueued_ahead"] == 40 and burst["enqueued_late"] == 0
    assert burst["lost"] == 0 and burst["duplicates"] == 0 and burst["unexpected_runs"] == 0


def test_one_tick_per_shard_enqueues_the_whole_burst(burst):
    """Then the runs were created by the first tick of each shard whose look-ahead reaches 09:00."""
    assert burst["minutes_needed"] == 1 and burst["ticks_needed"] <= burst["shards"]
    assert {t["at"] for t in burst["ticks"] if t["runs_created"]} == {"2026-03-02T08:59:00+00:00"}
    assert max(t["runs_created"] for t in burst["ticks"]) > burst["page_size"]  # it paged


def test_a_burst_run_costs_no_more_requests_than_a_steady_state_run(burst):
    """Then per run the burst made at most the steady state's WRU, RRU, SQS and DynamoDB requests
    (the same writes per run; the ticks' fixed reads spread over more runs), with nothing unmetered."""
    assert burst["steady"]["lost"] == 0 and burst["steady"]["duplicates"] == 0
    for key, ratio in burst["per_run_vs_steady"].items():
        assert ratio is not None and ratio <= 1.0, key
    writes = burst["operations_per_run"]["dispatcher"]
    assert writes["dynamodb.PutItem"] == pytest.approx(1.0)  # one conditional put per run
    assert burst["unmetered_calls"] == {}


def test_the_cli_prints_the_burst_figure_under_its_key(burst, monkeypatch, capsys):
    """When ``jobsched bench --burst --burst-jobs 8 --json`` runs / Then it asks for a burst of 8 jobs
    (the module's figures are taken instead of running another) and its last line holds the figure
    under ``burst``, exit 0 (nothing lost, doubled or late)."""
    from jobsched.bench import burst as burst_module

    asked: list[BurstConfig] = []
    monkeypatch.setattr(burst_module, "run_burst", lambda config: asked.append(config) or burst)
    assert cli.main(["bench", "--burst", "--burst-jobs", "8", "--json"]) == 0
    assert asked == [BurstConfig(jobs=8, shards=4)]
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures == {"burst": burst} and figures["burst"]["enqueued_late"] == 0


def test_bad_burst_options_are_refused(capsys):
    """When --burst-jobs is out of range / Then a clear error, exit 2."""
    assert cli.main(["bench", "--burst", "--burst-jobs", "0"]) == 2
    assert "--burst-jobs" in capsys.readouterr().err
