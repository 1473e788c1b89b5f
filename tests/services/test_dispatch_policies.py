"""Overlap buffer_one/replace, skip summaries after a long pause, and dispatchers racing in threads."""

from __future__ import annotations

import threading
from datetime import timedelta

from jobsched.aws.leases import LeaseHeldError
from jobsched.core.errors import LeaseLostError
from jobsched.core.models import RunState, make_run_id
from jobsched.services.dispatcher import Dispatcher, DispatcherConfig
from tests.aws.conftest import T0
from tests.aws.memory import build_pipeline, memory_aws, memory_pipeline  # noqa: F401  (on the in-memory fakes)

EVERY_MINUTE = {"name": "tick", "schedule": "* * * * *", "target": {"handler": "echo"}}


def _run(p, job, minute: int):
    return p.dispatcher.runs.get(make_run_id(job.id, T0 + timedelta(minutes=minute)))


def _start(p, job, minute: int):
    """What a worker's claim does: queued -> running."""
    return p.dispatcher.runs.transition(
        _run(p, job, minute), RunState.RUNNING, T0 + timedelta(minutes=minute)
    )


def test_buffer_one_keeps_one_occurrence_and_releases_it_when_the_previous_run_ends(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"overlap_policy": "buffer_one"}, T0)
    running = _start(pipeline, job, 0)
    # 12:01 comes due while 12:00 runs: buffered, no run yet; 12:02 too: skipped (one is buffered)
    pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=1, seconds=1)
    )
    pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=2, seconds=1)
    )
    assert pipeline.dispatcher.jobs.get("acme", job.id).buffered_at == T0 + timedelta(minutes=1)
    assert _run(pipeline, job, 2).skip_reason == "overlap"
    # When 12:00 finishes, the next tick starts the buffered 12:01 occurrence
    pipeline.dispatcher.runs.transition(running, RunState.SUCCEEDED, T0 + timedelta(minutes=2, seconds=30))
    pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=2, seconds=40)
    )
    released = _run(pipeline, job, 1)
    assert released.state is RunState.QUEUED
    assert pipeline.dispatcher.jobs.get("acme", job.id).buffered_at is None


def test_replace_cancels_a_queued_previous_run(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"overlap_policy": "replace"}, T0)
    # Given the 12:00 run never started (e.g. the queue is backed up) and 12:01 comes due
    summary = pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=1, seconds=1)
    )
    # Then the 12:00 run is cancelled (reason replaced) and 12:01 is queued
    previous = _run(pipeline, job, 0)
    assert previous.state is RunState.CANCELLED and previous.error == "replaced"
    assert _run(pipeline, job, 1).state is RunState.QUEUED and summary.runs_cancelled == 1


def test_replace_flags_a_running_previous_run_for_cancellation(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"overlap_policy": "replace"}, T0)
    _start(pipeline, job, 0)
    pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=1, seconds=1)
    )
    previous = _run(pipeline, job, 0)
    assert previous.state is RunState.RUNNING and previous.cancel_requested
    assert _run(pipeline, job, 1).state is RunState.QUEUED


def test_a_long_pause_of_a_per_second_job_is_summarised_not_written_one_by_one(pipeline):
    job = pipeline.jobs.create(
        "acme",
        {"name": "s", "schedule": "* * * * * *", "target": {"handler": "echo"}, "misfire_policy": "skip"},
        T0,
    )
    pipeline.jobs.pause("acme", job.id, T0 + timedelta(seconds=1))
    resumed = pipeline.jobs.resume("acme", job.id, T0 + timedelta(hours=1))
    # Then the 3538 occurrences missed beyond the grace (12:00:02 .. 12:58:59, the 59 the pause
    # withdrew included) are one summary record
    runs, _ = pipeline.dispatcher.runs.list_for_job(job.id, limit=1000)
    misfired = [r for r in runs if r.skip_reason == "misfire"]
    assert [(r.skipped_count, r.scheduled_at, r.skipped_until) for r in misfired] == [
        (3538, T0 + timedelta(seconds=2), T0 + timedelta(seconds=3539))
    ]
    assert resumed.next_due_at > T0 + timedelta(hours=1)


def test_concurrent_dispatchers_in_threads_create_each_run_once(aws):
    # Given 8 per-minute jobs on one shard and four dispatchers ticking it at once, twice
    from tests.aws.conftest import provision

    aws.settings = provision(aws.clients, prefix="race", shards=1)
    p = build_pipeline(aws)
    jobs = [p.jobs.create(f"t{i}", EVERY_MINUTE, T0 - timedelta(hours=1)) for i in range(8)]
    d = p.dispatcher
    dispatchers = [
        Dispatcher(
            d.jobs,
            d.runs,
            d.leases,
            d.queues,
            config=DispatcherConfig(
                lookahead=d.lookahead, owner=f"d{i}", enqueue_horizon=d.horizon, reads_clock=False
            ),
            clock=d.clock,
        )
        for i in range(4)
    ]
    barrier = threading.Barrier(4)
    busy: list[int] = []

    def tick(dispatcher: Dispatcher) -> None:
        for now in (T0, T0 + timedelta(seconds=61)):
            barrier.wait()
            try:
                dispatcher.dispatch_shard(0, now)
            except (LeaseHeldError, LeaseLostError):  # turned away, or overtaken and stopped by the fence
                busy.append(1)

    threads = [threading.Thread(target=tick, args=(x,)) for x in dispatchers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then every occurrence up to 12:02 has exactly one run, and the lease turned the others away
    for job in jobs:
        runs, _ = p.dispatcher.runs.list_for_job(job.id, limit=1000, since=T0)
        assert [r.scheduled_at for r in runs if r.state is RunState.QUEUED] == [
            T0 + timedelta(minutes=m) for m in (2, 1, 0)
        ]
    assert len(busy) >= 1


def test_a_job_waiting_on_its_buffered_occurrence_costs_no_write_per_tick(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"overlap_policy": "buffer_one"}, T0)
    _start(pipeline, job, 0)
    pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=1, seconds=1)
    )  # 12:01 buffered
    pipeline.meter.reset()
    # When a tick finds the previous run still running and nothing new due
    summary = pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=1, seconds=20)
    )
    # Then the job is read but not written (only the lease is)
    by_table = pipeline.meter.snapshot()["dynamodb"]["wcu_by_table"]
    assert summary.jobs_held == 1 and by_table.get(pipeline.env.settings.jobs_table, 0) == 0
