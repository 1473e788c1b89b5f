"""Guarantee 4: the sweeper re-sends runs whose send was lost, reclaims runs whose lease expired, and
ends the runs it gives up on (failed, reason stranded); its reach is the in-flight ledger."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jobsched.aws.jobs_store import JobsStore
from jobsched.core.inflight import PARTITIONS
from jobsched.core.models import Job, JobState, RetrySpec, RunState, to_iso
from jobsched.runtime.observability import RUNS_DEAD_LETTERED, RUNS_RECLAIMED, RUNS_RESENT, RUNS_STRANDED
from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import Kit, run_service, sent_messages, sweeper_for
from tests.aws.memory import memory_aws_units  # noqa: F401  (on the in-memory fakes)


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
    assert kit.worker().handle(Delivery.of(json.dumps(body)), clock.now()).status == "succeeded"
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
    out = kit.worker("worker-b").handle(Delivery.of(json.dumps(body)), clock.now())
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


def drain(aws, kind: str = "default") -> None:
    """Lose every message of a queue (what the emulator race or a lost send leaves: no message)."""
    aws.clients.sqs.purge_queue(QueueUrl=aws.settings.queue_urls[kind])


def test_resends_are_bounded_and_then_the_run_is_declared_stranded(kit, jobs, sweeper, clock, aws):
    # Given a run whose every message is lost
    make_job(jobs, clock)
    run, _ = kit.new_run()
    # When the sweeper runs many times, far apart, and each re-sent message is lost too
    results = []
    for _ in range(5):
        clock.advance(minutes=3)
        results.append(sweeper.sweep(clock.now()))
        drain(aws)
    # Then it re-sent max_sweeps times, then ended the run: failed, reason stranded, a dead letter
    assert [s.resent for s in results] == [1, 1, 1, 0, 0]
    assert [s.stranded for s in results] == [0, 0, 0, 1, 0]
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.FAILED and stored.error.startswith("stranded: the run stayed queued")
    item = kit.attempts.get_item(run.id)
    assert item["dl_reason"] == "stranded" and item["dl_tenant"] == "acme"
    assert json.loads(item["dl_message"])["payload"] == {"from": "job"}
    assert [r.id for r in kit.runs.list_dead_letters("acme")[0]] == [run.id]
    assert kit.metrics.count(RUNS_STRANDED) == 1 and kit.metrics.count(RUNS_DEAD_LETTERED) == 1
    # And the ledger item that named it is gone once the run ended
    assert results[-1].ledger_items == 0


def test_a_run_is_not_declared_stranded_while_its_queue_holds_a_backlog(kit, jobs, sweeper, clock, aws):
    # Given a run re-sent max_sweeps times whose messages are still in the queue (workers behind)
    make_job(jobs, clock)
    run, _ = kit.new_run()
    for _ in range(3):
        clock.advance(minutes=3)
        sweeper.sweep(clock.now())
    # When the sweeper runs again, Then it defers: the message may only be waiting its turn
    clock.advance(minutes=3)
    summary = sweeper.sweep(clock.now())
    assert (summary.deferred, summary.stranded) == (1, 0)
    assert kit.runs.get(run.id).state is RunState.QUEUED


def test_a_stranded_run_is_replayable_like_any_dead_letter(kit, jobs, sweeper, clock, aws):
    # Given a run declared stranded
    make_job(jobs, clock)
    run, _ = kit.new_run()
    for _ in range(4):
        clock.advance(minutes=3)
        sweeper.sweep(clock.now())
        drain(aws)
    assert kit.runs.get(run.id).state is RunState.FAILED
    # When it is replayed, Then its message goes out and a worker completes it
    replayed = run_service(kit).replay("acme", run.id, clock.now())
    assert replayed.state is RunState.QUEUED
    [(body, _)] = sent_messages(aws)
    assert kit.worker().handle(Delivery.of(json.dumps(body)), clock.now()).status == "succeeded"


def test_a_run_scheduled_long_ago_is_in_reach(kit, jobs, sweeper, clock, aws):
    # Given a backfilled run: scheduled a month before it was created, its message lost
    make_job(jobs, clock)
    at = clock.now() - timedelta(days=30)
    run, _ = kit.new_run(scheduled_at=at)
    kit.dynamo.update(
        kit.aws.settings.runs_table,
        {"job_id": run.job_id, "run_key": run.run_key},
        "SET due_at = :now",
        values={":now": to_iso(clock.now())},
    )
    # When the sweeper runs after the grace period
    clock.advance(minutes=3)
    summary = sweeper.sweep(clock.now())
    # Then it is found and re-sent, whatever its scheduled instant
    assert summary.resent == 1
    [(body, _)] = sent_messages(aws)
    assert body["run_id"] == run.id


def test_runs_of_a_deleted_job_are_found_and_failed(kit, sweeper, clock):
    # Given a queued run whose message was lost and whose job is gone
    run, _ = kit.new_run()
    clock.advance(minutes=3)
    # When the sweeper runs, Then the run ends failed (lost): every run ends
    assert sweeper.sweep(clock.now()).failed == 1
    assert kit.runs.get(run.id).state is RunState.FAILED


def test_a_settled_ledger_item_is_deleted_and_idle_jobs_cost_no_request(kit, jobs, sweeper, clock):
    # Given many registered jobs, and one run that succeeded
    for i in range(30):
        make_job(jobs, clock, job_id=f"job{i}")
    _, msg = kit.new_run()
    assert kit.worker().handle(Delivery.of(msg.to_json()), clock.now()).status == "succeeded"
    # When the sweeper runs after the grace period
    clock.advance(minutes=3)
    first = sweeper.sweep(clock.now())
    # Then the run's ledger item is read once and deleted
    assert (first.ledger_items, first.settled, first.runs_examined) == (1, 1, 0)
    # And a sweep with nothing in flight reads no job and queries only the ledger's partitions
    kit.meter.reset()
    assert sweeper.sweep(clock.now()).ledger_items == 0
    assert dict(kit.meter.requests) == {"dynamodb.Query": PARTITIONS}


def test_a_jobs_runs_named_by_several_ledger_items_are_read_by_one_query(kit, jobs, sweeper, clock):
    # Given five runs of one per-minute job, each named by a ledger item of its own, all succeeded
    make_job(jobs, clock)
    start = clock.now()
    for minute in range(5):
        _, msg = kit.new_run(scheduled_at=start + timedelta(minutes=minute))
        clock.set(start + timedelta(minutes=minute))
        assert kit.worker().handle(Delivery.of(msg.to_json()), clock.now()).status == "succeeded"
    # When the sweeper runs after the grace period
    clock.advance(minutes=3)
    kit.meter.reset()
    summary = sweeper.sweep(clock.now())
    # Then the five runs are read with one Query over their keys (0.5 RRU for the five, where reading
    # them by key bills 0.5 each), and the five items are settled
    assert (summary.ledger_items, summary.settled) == (5, 5)
    assert kit.meter.requests["dynamodb.Query"] == PARTITIONS + 1
    assert "dynamodb.BatchGetItem" not in kit.meter.requests
    assert kit.meter.rcu["Query"] == PARTITIONS * 0.5 + 0.5


def test_a_young_ledger_item_whose_run_is_not_put_yet_is_kept(kit, sweeper, clock):
    # Given a ledger item written just now naming a run not put yet (the put comes next)
    from jobsched.core.inflight import ledger_items

    [item] = ledger_items(["20260302T120000.000Z#job9"], clock.now(), lambda: "n1")
    kit.dynamo.put(kit.aws.settings.runs_table, item)
    # When the sweeper runs within the grace period, Then the item stays; after it, it goes
    assert sweeper.sweep(clock.now()).settled == 0
    clock.advance(minutes=3)
    assert sweeper.sweep(clock.now()).settled == 1


def test_a_ledger_item_whose_runs_are_not_due_yet_is_passed_over_unread(kit, jobs, sweeper, clock):
    # Given a run queued ahead, due in 10 minutes
    make_job(jobs, clock)
    kit.new_run(scheduled_at=clock.now() + timedelta(minutes=10))
    # When the sweeper runs before it is due, Then it reads the ledger item but not the run
    kit.meter.reset()
    summary = sweeper.sweep(clock.now() + timedelta(minutes=5))
    assert (summary.ledger_items, summary.runs_examined, summary.settled) == (1, 0, 0)
    assert dict(kit.meter.requests) == {"dynamodb.Query": PARTITIONS}
