"""The fault-injection battery's short form (``make chaos`` runs all of it, docs/reliability.md): a few
scenarios on a small pipeline, each judged by the handler's own ledger, must lose nothing, duplicate
no effect and leave no run unfinished."""

from __future__ import annotations

import pytest

from jobsched.bench.chaos import BatteryConfig, run_scenario, scenarios, table

pytestmark = pytest.mark.slow

SHORT = BatteryConfig(jobs=4, minutes=6, shards=2, recovery_cap_minutes=30)
BY_NAME = {s.name: s for s in scenarios()}
SHORT_FORM = (
    "crash_after_effect_before_result",
    "throttle_worker_writes",
    "reset_after_write_worker",
    "sqs_partial_batch_send",
)


@pytest.mark.parametrize("name", SHORT_FORM)
def test_scenario_loses_nothing_duplicates_no_effect_and_ends_every_run(name):
    # Given the pipeline under the scenario's fault / When it has run and recovered
    result = run_scenario(BY_NAME[name], SHORT)
    # Then (the ledger, not the system's counters): every occurrence ended, done once
    assert result.runs == SHORT.jobs * SHORT.minutes
    assert (result.lost, result.duplicated_effects, result.non_terminal) == (0, 0, 0), result.to_dict()
    assert result.recovery_minutes is not None
    assert result.succeeded + result.skipped == result.runs
    if BY_NAME[name].rules:  # the fault was really injected
        assert sum(result.injected.values()) > 0


def test_a_fault_that_loses_work_is_reported():
    # Given an outage (no tick, no worker, no sweep) that lasts to the end of the simulation: no
    # minute is left to recover in
    from dataclasses import replace

    outage = replace(BY_NAME["outage_1h_run_all"], fault_minutes=(0, SHORT.minutes + 2))
    result = run_scenario(outage, replace(SHORT, recovery_cap_minutes=0))
    # Then the battery says so: runs are missing and the goal is not met
    assert result.lost + result.non_terminal == result.runs and not result.ok
    assert "not recovered" in table([result])


def test_container_workers_stopped_and_killed_mid_run_lose_nothing_and_double_no_effect():
    # Given container workers consuming the runs, one stopped with SIGTERM mid-run, the next killed
    result = run_scenario(BY_NAME["container_task_killed"], SHORT)
    # Then the stopped worker's runs were handed back and the killed one's died mid-run (both injected)
    assert result.injected.get("handed_back", 0) > 0 and result.injected.get("crashed_invocations", 0) > 0
    # and, by the ledger, every occurrence ended, each effect done once
    assert (result.lost, result.duplicated_effects, result.non_terminal) == (0, 0, 0), result.to_dict()
    assert result.succeeded == result.runs == SHORT.jobs * SHORT.minutes
