"""The scaling model (jobsched/bench/scaling.py, docs/scaling.md): measured requests per run times
AWS's limits, stage by stage."""

from __future__ import annotations

import pytest

from jobsched.bench.scaling import (
    Assumptions,
    Measured,
    dispatcher_runs_per_second_per_shard,
    model,
    report,
    scale_up_minutes,
)

#: The shape of ``jobsched bench --json``'s pipeline figures (the parts the model reads): 100
#: per-minute jobs, 4 shards, per successful run.
FIGURES = {
    "runs": 500,
    "succeeded": 500,
    "wru": 3.9,
    "rru": 1.0,
    "setup": {"jobs": 100, "shards": 4},
    "breakdown": {
        "dispatcher": {
            "operations": {
                "dynamodb.PutItem": {"requests": 1.0, "wru": 1.0, "rru": 0.0},
                "dynamodb.UpdateItem": {"requests": 0.28, "wru": 0.68, "rru": 0.0},
                "dynamodb.Query": {"requests": 0.32, "wru": 0.0, "rru": 0.16},
                "dynamodb.BatchWriteItem": {"requests": 0.008, "wru": 0.08, "rru": 0.0},
                "sqs.SendMessageBatch": {"requests": 0.1, "wru": 0.0, "rru": 0.0},
            }
        },
        "worker": {"operations": {"dynamodb.UpdateItem": {"requests": 2.1, "wru": 2.1, "rru": 0.0}}},
    },
    "by_table": {"Jobs": {"wru": 0.6, "rru": 0.2}, "Runs": {"wru": 3.12, "rru": 0.8}},
}


def test_the_measured_figures_are_read_per_run():
    """Given the pipeline's figures, When read, Then the tick's two lease writes per shard and minute
    are taken out of the advances (0.28 - 2 x 4/100 = 0.2 a run) and out of the dispatcher's calls,
    the per-tick Query is left out, and the per-table units are kept."""
    measured = Measured.from_pipeline(FIGURES)
    assert measured.advances == pytest.approx(0.2)
    assert measured.dispatcher_calls == pytest.approx(1.0 + 0.28 + 0.008 + 0.1 - 0.08)
    assert measured.dispatcher_job_calls == pytest.approx(1.2)
    assert measured.worker_calls == pytest.approx(2.1)
    assert measured.feed_wru == pytest.approx(0.08)
    assert measured.table_wru == {"Jobs": 0.6, "Runs": 3.12}


def test_a_shards_throughput_grows_with_the_dispatch_concurrency():
    """Given 1.2 calls per run made per job and 0.108 per page, at 5 ms a call, Then one job at a
    time a shard dispatches 50/60 / (1.308 x 5 ms) runs a second, and 8 at a time
    50/60 / ((0.108 + 1.2 / 8) x 5 ms)."""
    measured = Measured.from_pipeline(FIGURES)
    one = dispatcher_runs_per_second_per_shard(measured, Assumptions(dispatch_concurrency=1))
    eight = dispatcher_runs_per_second_per_shard(measured, Assumptions(dispatch_concurrency=8))
    assert one == pytest.approx((50 / 60) / (1.308 * 0.005))
    assert eight == pytest.approx((50 / 60) / ((0.108 + 0.15) * 0.005))


def test_each_stage_is_compared_with_its_limit():
    """Given 10,000 runs a second of 1 s runs, Then the worker needs 10,000 x (1 s + 2.1 x 5 ms) / 10
    concurrent invocations (over the 1,000 a mapping may have), the Runs table 31,200 WRU/s (under
    the 40,000 quota), one due partition 10,000 x 0.2 x 2 / 32 WRU/s, and one tenant's Jobs key
    2,000 WRU/s (over a partition's 1,000)."""
    stages = {s.name: s for s in model(10_000, Measured.from_pipeline(FIGURES), Assumptions())}
    worker = stages["worker: concurrent invocations (one queue)"]
    assert worker.needed == pytest.approx(10_000 * 1.0105 / 10) and not worker.ok
    runs = stages["DynamoDB Runs table: write units per second"]
    assert runs.needed == pytest.approx(31_200) and runs.ok
    index = stages["DynamoDB due index: write units per second on one due partition"]
    assert index.needed == pytest.approx(10_000 * 0.2 * 2 / 32) and index.ok
    tenant = stages["one tenant: Jobs table key (its job advances)"]
    assert tenant.needed == pytest.approx(2_000) and not tenant.ok


def test_the_report_names_the_first_limit_and_the_scale_up_time():
    """Given the default assumptions, Then at 1,000 runs a second nothing is over a limit (but the
    defaults do not suffice: more shards and concurrency are needed), at 100,000 the dispatcher is
    the first stage over, and reaching 1,000 concurrent invocations from idle takes (1000 - 5) / 300
    minutes."""
    figures = report(Measured.from_pipeline(FIGURES), Assumptions())
    assert figures["rates"]["1000"]["first_limit"] is None
    assert figures["rates"]["1000"]["defaults_suffice"] is False
    assert figures["rates"]["100000"]["first_limit"] == "dispatcher: shards needed"
    assert scale_up_minutes(5_000) == pytest.approx(995 / 300)


def test_retries_get_headroom_in_the_workers_concurrency():
    """Given 10 % of runs retried once (the default), Then the worker's concurrency with headroom is
    10 % above the one for first attempts; at 1,000 runs a second it still fits a mapping."""
    measured = Measured.from_pipeline(FIGURES)
    stages = {s.name: s for s in model(1_000, measured, Assumptions())}
    first = stages["worker: concurrent invocations (one queue)"].needed
    headroom = stages["worker: concurrent invocations with retry headroom (one queue)"]
    assert headroom.needed == pytest.approx(first * 1.10) and headroom.ok
    assert not headroom.default_ok  # 111 invocations over the default queue's 20


def test_the_workers_measured_peak_memory_is_checked_against_its_size():
    """Given a measured peak of 300 MB, Then with 512 MB configured (half left to the handlers) the
    stage is over; with no measurement there is no such stage."""
    measured = Measured.from_pipeline(FIGURES)
    assert not any("memory" in s.name for s in model(1_000, measured, Assumptions()))
    measured.worker_peak_mb = 300.0
    stage = next(s for s in model(1_000, measured, Assumptions()) if "memory" in s.name)
    assert (stage.needed, stage.allowed, stage.ok) == (300.0, 256.0, False)


def test_the_workers_peak_memory_is_measured_on_a_handled_batch():
    """Given a fresh process that imports the worker and handles ten runs on the fakes, Then its peak
    resident memory is a positive figure well under the worker's 512 MB."""
    from jobsched.bench.scaling import measure_worker_peak_mb

    peak = measure_worker_peak_mb()
    assert 10 < peak < 512


def test_the_peak_is_the_measuring_processs_own_not_its_parents():
    """Given a parent process that holds 400 MB (as a pytest worker may), When it measures the worker's
    peak, Then the figure is the child's own: Linux carries ``ru_maxrss`` across fork and exec, which
    made a pytest worker's 600 MB the worker's "peak" (622.4 MB in CI, 2026-12-05)."""
    import subprocess
    import sys

    script = (
        "big = bytearray(400 * 1024 * 1024)\n"
        "for i in range(0, len(big), 4096): big[i] = 1\n"
        "from jobsched.bench.scaling import measure_worker_peak_mb\n"
        "print(measure_worker_peak_mb())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert 10 < float(out.stdout.strip().splitlines()[-1]) < 300
