"""The fair share's model (jobsched/bench/share_model.py, decision 0057): deterministic figures of
Lambda's SQS scaling with and without the share. What it must show: the quiet tenant's run starts
within a second behind runs of any length with the share, waits for a run to end without it, and the
bursting tenant drains as fast with the share as without, alone or not."""

from __future__ import annotations

import pytest

from jobsched.bench.share_model import ShareModelConfig, run_share_model


@pytest.mark.parametrize("run_seconds", [10.0, 600.0])
def test_with_the_share_a_quiet_run_starts_within_a_second_whatever_the_burst_run_length(run_seconds):
    figures = run_share_model(ShareModelConfig(run_seconds=run_seconds))
    share, without = figures["share"], figures["no_share"]
    assert (share["pool_ceiling"], without["pool_ceiling"]) == (25, 20)
    assert share["quiet_started"] == without["quiet_started"] == 20
    assert share["quiet_p99_seconds"] < 1.0
    # without it, the quiet runs that arrive while every slot is busy wait for a run to end
    assert without["quiet_p99_seconds"] > run_seconds / 3


@pytest.mark.parametrize("run_seconds", [10.0, 600.0])
def test_the_bursting_tenant_drains_as_fast_with_the_share(run_seconds):
    figures = run_share_model(ShareModelConfig(run_seconds=run_seconds))
    for alone in ("share_alone", "no_share_alone"):
        assert figures[alone]["quiet_started"] == 0
    plays = ("share", "no_share", "share_alone", "no_share_alone")
    drained = {name: figures[name]["noisy_drain_seconds"] for name in plays}
    fastest = min(drained.values())
    assert all(d <= fastest * 1.02 + 0.5 for d in drained.values()), drained


def test_the_model_is_deterministic():
    assert run_share_model() == run_share_model()
