"""The race the end-to-end pause test found, made deterministic against moto.

``test_e2e_pause`` saw, on a loaded machine, a run of a paused per-second job run 4 ms after the pause,
neither withdrawn nor skipped: a dispatcher tick had read the job just before the pause and created and
sent that run just after the pause had withdrawn the runs it found. Here the tick is replayed with the
job as it read it, after the pause, with fixed instants.
"""

from __future__ import annotations

from datetime import timedelta

from jobsched.core.models import RunState, make_run_id
from tests.aws.conftest import T0, aws, pipeline  # noqa: F401 -- the moto fixtures

HOURLY = {"name": "report", "schedule": "0 * * * *", "target": {"handler": "echo"}}
DUE = T0 + timedelta(hours=1)  # the next occurrence of HOURLY


def test_runs_a_tick_enqueues_for_a_job_paused_since_it_read_it_are_withdrawn(pipeline) -> None:  # noqa: F811
    # Given an hourly job (nothing queued yet), as a tick read it 30 s before its occurrence
    job = pipeline.jobs.create("acme", HOURLY, T0 + timedelta(minutes=1))
    tick_now = DUE - timedelta(seconds=30)
    read_by_tick = pipeline.jobs.get("acme", job.id)
    # And the job paused right after that read (nothing queued ahead to withdraw yet)
    assert pipeline.jobs.pause("acme", job.id, tick_now + timedelta(milliseconds=5)).withdrawn == []

    # When the tick goes on with the job it read
    summary = pipeline.dispatcher.dispatch_jobs([read_by_tick], tick_now)

    # Then its advance is refused, and the run it created for after the pause is withdrawn like the
    # pause would have: skipped, reason paused, so its message runs nothing
    assert summary.jobs_stale == 1
    run = pipeline.dispatcher.runs.get(make_run_id(job.id, DUE))
    assert (run.state, run.skip_reason) == (RunState.SKIPPED, "paused")
    # And the job stays paused with its cursor where the pause left it
    stored = pipeline.jobs.get("acme", job.id)
    assert (str(stored.state), stored.next_due_at) == ("paused", DUE)


def test_a_run_due_before_the_pause_is_left_to_run(pipeline) -> None:  # noqa: F811
    # Given an hourly job read by a tick at its occurrence, then paused a second later
    job = pipeline.jobs.create("acme", HOURLY, T0 + timedelta(minutes=1))
    read_by_tick = pipeline.jobs.get("acme", job.id)
    pipeline.jobs.pause("acme", job.id, DUE + timedelta(seconds=1))

    # When the tick goes on with the job it read
    pipeline.dispatcher.dispatch_jobs([read_by_tick], DUE)

    # Then the run, due before the pause (not queued ahead of it), stays queued, as the pause leaves it
    assert pipeline.dispatcher.runs.get(make_run_id(job.id, DUE)).state is RunState.QUEUED


def test_runs_a_tick_enqueues_for_a_job_deleted_since_it_read_it_are_withdrawn(pipeline) -> None:  # noqa: F811
    # Given an hourly job as a tick read it 30 s before its occurrence, deleted right after that read
    job = pipeline.jobs.create("acme", HOURLY, T0 + timedelta(minutes=1))
    tick_now = DUE - timedelta(seconds=30)
    read_by_tick = pipeline.jobs.get("acme", job.id)
    assert pipeline.jobs.delete("acme", job.id, tick_now + timedelta(milliseconds=5)) == []

    # When the tick goes on with the job it read
    summary = pipeline.dispatcher.dispatch_jobs([read_by_tick], tick_now)

    # Then the run it created is withdrawn as the delete would have: skipped, reason deleted
    assert summary.jobs_stale == 1
    run = pipeline.dispatcher.runs.get(make_run_id(job.id, DUE))
    assert (run.state, run.skip_reason) == (RunState.SKIPPED, "deleted")
