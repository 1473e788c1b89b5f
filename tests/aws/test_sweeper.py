"""Guarantee 4: the sweeper re-sends runs whose send was lost and reclaims runs whose lease expired."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jobsched.aws.jobs_store import JobsStore
from jobsched.core.models import Job, JobState, RetrySpec, RunState
from jobsched.runtime.observability import RUNS_RECLAIMED, RUNS_RESENT
from tests.aws.conftest_worker import Kit, sent_messages, sweeper_for


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def jobs(kit):
    return JobsStore(kit.dynamo, kit.aws.settings.jobs_table)


@pytest.fixture
def sweeper(kit, jobs):
    return sweeper_for(kit, jobs)


def make_job(jobs: JobsStore, clock, job_id: str = "job1") -> Job:
    """A one-off job that was already dispatched (completed, no next due): only the sweeper can save
    its run if the send was lost."""
    return jobs.create(
        Job(
            id=job_id,
            tenant="acme",
            name="nightly",
            schedule="at(2026-03-02T12:00:00)",
            target={"handler": "demo.echo"},
            payload={"from": "job"},
            retry=RetrySpec(max_attempts=3),
            state=JobState.COMPLETED,
            created_at=clock.now() - timedelta(hours=1),
            updated_at=clock.now() - timedelta(hours=1),
        )
    )


def test_a_lost_send_is_found_and_resent_and_then_runs(kit, jobs, sweeper, clock, aws):
    # Given a run written by the dispatcher whose message was never sent
    make_job(jobs, clock)
    run, _ = kit.new_run()
    # When the sweeper runs after the grace period
    clock.advance(minutes=3)
    summary = sweeper.sweep(clock.now())
    # Then the run's first attempt is sent, built from the job, and a worker completes it
    assert summary.resent == 1 and summary.reclaimed == 0
    [(body, delay)] = sent_messages(aws)
    assert (body["run_id"], body["attempt"], body["payload"], delay) == (run.id, 1, {"from": "job"}, 0)
    assert kit.worker().process(json.dumps(body), clock.now()).status == "succeeded"
    assert kit.metrics.count(RUNS_RESENT) == 1


def test_a_run_within_the_grace_period_is_left_alone(kit, jobs, sweeper, clock, aws):
    make_job(jobs, clock)
    kit.new_run()
    clock.advance(seconds=60)
    assert sweeper.sweep(clock.now()).resent == 0 and sent_messages(aws) == []


def test_an_expired_lease_is_reclaimed_by_a_new_attempt(kit, jobs, sweeper, clock, aws):
    # Given a run whose worker died holding it, and whose message is gone
    make_job(jobs, clock)
    run, _ = kit.new_run()
    kit.attempts.claim(run.id, 1, "dead-worker", clock.now(), 60)
    clock.advance(minutes=5)
    # When the sweeper runs
    summary = sweeper.sweep(clock.now())
    # Then a message is sent, and the worker that gets it takes the run over as attempt 2
    assert summary.reclaimed == 1
    [(body, _)] = sent_messages(aws)
    out = kit.worker("worker-b").process(json.dumps(body), clock.now())
    assert out.status == "succeeded" and out.attempt == 2
    assert [a.outcome for a in kit.runs.get(run.id).attempts] == ["lost", "succeeded"]
    assert kit.metrics.count(RUNS_RECLAIMED) == 1


def test_a_second_sweep_soon_after_does_not_resend_again(kit, jobs, sweeper, clock, aws):
    make_job(jobs, clock)
    kit.new_run()
    clock.advance(minutes=3)
    sweeper.sweep(clock.now())
    clock.advance(seconds=30)
    assert sweeper.sweep(clock.now()).resent == 0
    assert len(sent_messages(aws)) == 1


def test_resends_are_bounded(kit, jobs, sweeper, clock, aws):
    # Given a run that stays queued whatever is sent (a backlog, say)
    make_job(jobs, clock)
    kit.new_run()
    # When the sweeper runs many times, far apart
    results = []
    for _ in range(5):
        clock.advance(minutes=3)
        results.append(sweeper.sweep(clock.now()))
    # Then it re-sent max_sweeps times and then gave up (logged)
    assert [s.resent for s in results] == [1, 1, 1, 0, 0] and results[-1].gave_up == 1


def test_runs_of_a_deleted_job_are_out_of_the_sweepers_reach(kit, sweeper, clock):
    # A known limit: the sweep walks runs through their jobs (deleting a job withdraws its queued runs)
    run, _ = kit.new_run()
    clock.advance(minutes=3)
    assert sweeper.sweep(clock.now()).jobs == 0
    assert kit.runs.get(run.id).state is RunState.QUEUED
