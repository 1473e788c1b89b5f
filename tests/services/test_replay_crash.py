"""Guarantee 4 for replays: a replay (or retry) of a failed run is three writes — mark it queued with
its message kept as ``replay_message``, send, clear the marker — and a crash between any two of them
loses nothing: the run is not listed as a dead letter meanwhile, and the sweeper re-sends the kept
message or only clears the marker."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from botocore.exceptions import ClientError

import jobsched.services.runs
from jobsched.aws.jobs_store import JobsStore
from jobsched.core.errors import ConflictError, NotFoundError, RetryableError
from jobsched.core.models import Job, JobState, RetrySpec, RunState
from jobsched.runtime.observability import RUNS_RESENT
from jobsched.services.dead_letters import DeadLetterService
from jobsched.services.deliveries import Delivery
from jobsched.services.runs import finish_replay
from jobsched.services.sweeper import DEFAULT_GRACE
from tests.aws.conftest_worker import Kit, run_service, sent_messages, sweeper_for
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)

REPLAY_ATTRIBUTES = ("dl_tenant", "dl_at", "dl_reason", "dl_message", "replay_pending_at", "replay_message")


class Crash(BaseException):
    """The API process dying: not an ``Exception``, so no ``except Exception`` handles it."""


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def service(kit):
    return run_service(kit)


@pytest.fixture
def dead(service):
    return DeadLetterService(service)


@pytest.fixture
def sweeper(kit):
    return sweeper_for(kit, jobs_with_job1(kit))


def jobs_with_job1(kit) -> JobsStore:
    """The Jobs table holding the dead letters' job (a replay without a kept message reads it)."""
    jobs = JobsStore(kit.dynamo, kit.aws.settings.jobs_table)
    jobs.create(
        Job(
            id="job1",
            tenant="acme",
            name="nightly",
            schedule="at(2026-03-01T12:00:00)",
            target={"handler": "demo.flaky"},
            payload={},
            retry=RetrySpec(max_attempts=1),
            state=JobState.COMPLETED,
            created_at=kit.clock.now() - timedelta(days=2),
            updated_at=kit.clock.now() - timedelta(days=2),
        )
    )
    return jobs


def old_dead_letter(kit, payload: dict | None = None, *, job_id: str = "job1"):
    """A run scheduled a day ago (far outside the sweeper's lookback) that failed for good: its one
    attempt failed (``demo.flaky`` planned to fail 5 times, ``max_attempts`` 1)."""
    run, msg = kit.new_run(
        {"handler": "demo.flaky"},
        payload or {"failures": 5},
        job_id=job_id,
        scheduled_at=kit.clock.now() - timedelta(days=1),
        max_attempts=1,
    )
    assert kit.worker().handle(Delivery.of(msg.to_json()), kit.clock.now()).status == "dead_lettered"
    return run


def crash_before_send(monkeypatch, dead):
    def send(*args, **kwargs):
        raise Crash("the API process died before sending")

    monkeypatch.setattr(dead.service.queues, "send_one", send)


def crash_before_finish(monkeypatch):
    def finish(*args, **kwargs):
        raise Crash("the API process died after sending")

    monkeypatch.setattr(jobsched.services.runs, "finish_replay", finish)


def replay_attributes(kit, run_id: str) -> dict:
    item = kit.attempts.get_item(run_id)
    return {k: item[k] for k in REPLAY_ATTRIBUTES if k in item}


def test_a_normal_replay_leaves_no_dead_letter_or_pending_attributes(kit, dead, clock, aws):
    # Given a dead letter
    run = old_dead_letter(kit)
    # When it is replayed
    clock.advance(minutes=1)
    queued = dead.replay("acme", run.id, clock.now(), payload={"failures": 0})
    # Then the run is queued, its message sent, and nothing of the dead letter or the replay is left
    assert queued.state is RunState.QUEUED and queued.dead_lettered_at is None
    assert replay_attributes(kit, run.id) == {}
    assert [b["attempt"] for b, _ in sent_messages(aws)] == [2]
    assert dead.list("acme") == ([], None)


def test_crash_before_the_send_hides_the_run_from_the_dead_letters(kit, service, dead, clock, monkeypatch):
    # Given a dead letter whose replay died after marking it queued, before sending
    run = old_dead_letter(kit)
    crash_before_send(monkeypatch, dead)
    with pytest.raises(Crash):
        dead.replay("acme", run.id, clock.now(), payload={"failures": 0})
    # Then the run is queued and no longer a dead letter: not listed, not replayable, not discardable
    assert kit.runs.get(run.id).state is RunState.QUEUED
    assert dead.list("acme") == ([], None)
    with pytest.raises(NotFoundError):
        dead.replay("acme", run.id, clock.now())
    with pytest.raises(NotFoundError):
        dead.discard("acme", run.id, clock.now())
    with pytest.raises(ConflictError):
        service.retry("acme", run.id, clock.now())
    assert dead.replay_matching("acme", clock.now())["replayed"] == 0


def test_crash_before_the_send_is_resent_by_the_sweeper_and_runs_once(
    kit, dead, sweeper, clock, aws, monkeypatch
):
    # Given a replay with a corrected payload that died before its message was sent
    run = old_dead_letter(kit)
    with monkeypatch.context() as patch:
        crash_before_send(patch, dead)
        with pytest.raises(Crash):
            dead.replay("acme", run.id, clock.now(), payload={"failures": 0, "fixed": True})
    assert sent_messages(aws) == []
    # When the sweeper runs within the grace period, it leaves the replay alone
    clock.advance(seconds=DEFAULT_GRACE.total_seconds() - 1)
    early = sweeper.sweep(clock.now())
    assert (early.replays_resent, early.replays_cleaned, sent_messages(aws)) == (0, 0, [])
    # When it runs after the grace period
    clock.advance(seconds=2)
    summary = sweeper.sweep(clock.now())
    # Then exactly the replay's message is sent: attempt 2, the corrected payload
    assert (summary.replays_resent, summary.replays_cleaned, summary.resent) == (1, 0, 0)
    [(body, delay)] = sent_messages(aws)
    assert (body["run_id"], body["attempt"], body["payload"], delay) == (
        run.id,
        2,
        {"failures": 0, "fixed": True},
        0,
    )
    assert kit.metrics.count(RUNS_RESENT) == 1
    assert replay_attributes(kit, run.id) == {}
    # And the worker runs it once, with that payload
    worker = kit.worker()
    assert worker.handle(Delivery.of(json.dumps(body)), clock.now()).status == "succeeded"
    assert worker.handle(Delivery.of(json.dumps(body)), clock.now()).status == "finished"
    done = kit.runs.get(run.id)
    assert done.output == {"attempt": 2, "failures": 0} and [a.attempt for a in done.attempts] == [1, 2]
    # And a later sweep finds nothing more to do
    clock.advance(minutes=5)
    later = sweeper.sweep(clock.now())
    assert (later.replays_resent, later.replays_cleaned, len(sent_messages(aws))) == (0, 0, 1)


def test_crash_after_the_send_the_run_executes_and_the_sweeper_only_cleans_up(
    kit, dead, sweeper, clock, aws, monkeypatch
):
    # Given a replay that sent its message and died before its last write
    run = old_dead_letter(kit)
    with monkeypatch.context() as patch:
        crash_before_finish(patch)
        with pytest.raises(Crash):
            dead.replay("acme", run.id, clock.now(), payload={"failures": 0})
    [(body, _)] = sent_messages(aws)
    # When the worker runs it
    assert kit.worker().handle(Delivery.of(json.dumps(body)), clock.now()).status == "succeeded"
    assert "replay_pending_at" in replay_attributes(kit, run.id)
    assert dead.list("acme") == ([], None)  # succeeded, still in the index: not a dead letter
    # And the sweeper runs after the grace period
    clock.advance(minutes=3)
    summary = sweeper.sweep(clock.now())
    # Then it only removes the marker and index keys: no second message
    assert (summary.replays_resent, summary.replays_cleaned) == (0, 1)
    assert len(sent_messages(aws)) == 1
    assert replay_attributes(kit, run.id) == {} and kit.runs.get(run.id).state is RunState.SUCCEEDED


def test_a_resend_of_a_replay_already_sent_does_not_run_it_twice(kit, dead, sweeper, clock, aws, monkeypatch):
    # Given a replay that sent its message and died before its last write, the message not yet taken
    run = old_dead_letter(kit)
    with monkeypatch.context() as patch:
        crash_before_finish(patch)
        with pytest.raises(Crash):
            dead.replay("acme", run.id, clock.now(), payload={"failures": 0})
    # When the sweeper runs while the run is still queued
    clock.advance(minutes=3)
    assert sweeper.sweep(clock.now()).replays_resent == 1
    # Then there are two messages for attempt 2, and the worker runs the attempt once
    bodies = [b for b, _ in sent_messages(aws)]
    assert [b["attempt"] for b in bodies] == [2, 2]
    worker = kit.worker()
    assert [worker.handle(Delivery.of(json.dumps(b)), clock.now()).status for b in bodies] == [
        "succeeded",
        "finished",
    ]
    assert [a.attempt for a in kit.runs.get(run.id).attempts] == [1, 2]


def test_a_run_that_failed_again_keeps_its_new_dead_letter(kit, dead, sweeper, clock, aws, monkeypatch):
    # Given a replay (payload not fixed) that sent its message and died before its last write
    run = old_dead_letter(kit)
    first_failure = kit.attempts.get_item(run.id)["dl_at"]
    with monkeypatch.context() as patch:
        crash_before_finish(patch)
        with pytest.raises(Crash):
            dead.replay("acme", run.id, clock.now())
    since = kit.attempts.get_item(run.id)["replay_pending_at"]
    [(body, _)] = sent_messages(aws)
    # And the replayed attempt failed again a minute later
    clock.advance(minutes=1)
    assert kit.worker().handle(Delivery.of(json.dumps(body)), clock.now()).status == "dead_lettered"
    # When the replay's last write comes late, and the sweeper runs after the grace period
    key = {"job_id": run.job_id, "run_key": run.run_key}
    assert finish_replay(kit.dynamo, kit.aws.settings.runs_table, key, since, first_failure) is None
    clock.advance(minutes=3)
    summary = sweeper.sweep(clock.now())
    # Then the new dead letter is listed, with its own failure time, and nothing was re-sent
    assert (summary.replays_resent, summary.replays_cleaned, len(sent_messages(aws))) == (0, 0, 1)
    [view] = dead.list("acme")[0]
    assert view["run_id"] == run.id and view["failed_at"] == "2026-03-02T12:01:00.000Z"
    assert view["failed_at"] != first_failure and view["reason"] == "exhausted"
    assert "replay_pending_at" not in replay_attributes(kit, run.id)


def test_a_failed_send_restores_the_dead_letter(kit, dead, clock, monkeypatch):
    # Given a dead letter
    run = old_dead_letter(kit)
    before = kit.attempts.get_item(run.id)

    def send(*args, **kwargs):
        raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}}, "SendMessage")

    monkeypatch.setattr(dead.service.queues, "send_one", send)
    # When its replay cannot send
    with pytest.raises(RetryableError):
        dead.replay("acme", run.id, clock.now(), payload={"failures": 0})
    # Then it is the dead letter it was: same item, listed, replayable later
    assert kit.attempts.get_item(run.id) == before
    assert [v["run_id"] for v in dead.list("acme")[0]] == [run.id]


def test_a_pending_replay_does_not_cost_a_page_of_the_listing(kit, dead, clock, monkeypatch):
    # Given three dead letters, the middle one with a replay stranded before its send
    ids = []
    for job_id in ("alpha", "beta", "gamma"):
        ids.append(old_dead_letter(kit, job_id=job_id).id)
        clock.advance(minutes=1)
    with monkeypatch.context() as patch:
        crash_before_send(patch, dead)
        with pytest.raises(Crash):
            dead.replay("acme", ids[1], clock.now())
    # When the dead letters are listed one per page
    page1, cursor = dead.list("acme", limit=1)
    page2, end = dead.list("acme", limit=1, cursor=cursor)
    # Then each page holds a dead letter, the pending replay skipped, and the second page ends the
    # list (no cursor to an empty page)
    assert [v["run_id"] for v in page1 + page2] == [ids[2], ids[0]]
    assert end is None


def test_a_stranded_retry_of_a_discarded_run_is_found_too(
    kit, service, dead, sweeper, clock, aws, monkeypatch
):
    # Given a discarded dead letter (out of the index), retried, the retry dying before its send
    run = old_dead_letter(kit)
    dead.discard("acme", run.id, clock.now())
    with monkeypatch.context() as patch:
        crash_before_send(patch, dead)
        with pytest.raises(Crash):
            service.retry("acme", run.id, clock.now(), payload={"failures": 0})
    # When the sweeper runs after the grace period
    clock.advance(minutes=3)
    summary = sweeper.sweep(clock.now())
    # Then the retry's message is sent and the run is in no dead-letter listing
    assert summary.replays_resent == 1
    [(body, _)] = sent_messages(aws)
    assert body["attempt"] == 2 and replay_attributes(kit, run.id) == {}
    assert kit.worker().handle(Delivery.of(json.dumps(body)), clock.now()).status == "succeeded"


def test_a_stranded_replay_is_found_when_its_tenant_has_no_job_left(
    kit, dead, sweeper, clock, aws, monkeypatch
):
    # Given a replay that died before its message was sent, and then its job deleted (the tenant has
    # no job left)
    run = old_dead_letter(kit)
    with monkeypatch.context() as patch:
        crash_before_send(patch, dead)
        with pytest.raises(Crash):
            dead.replay("acme", run.id, clock.now())
    JobsStore(kit.dynamo, kit.aws.settings.jobs_table).delete("acme", "job1")
    # When the sweeper runs after the grace period
    clock.advance(minutes=3)
    summary = sweeper.sweep(clock.now())
    # Then the replay's message is sent all the same (the sweeper reads the runs in flight, not jobs)
    assert summary.replays_resent == 1
    [(body, _)] = sent_messages(aws)
    assert (body["run_id"], body["attempt"]) == (run.id, 2)
