"""Leases and fencing (guarantee 3): heartbeats, takeover after expiry, stale writes rejected."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from jobsched.core.errors import LeaseLostError
from jobsched.core.models import RunState
from jobsched.runtime.observability import RUN_DURATION, RUNS_DEAD_LETTERED, RUNS_FAILED, RUNS_SUCCEEDED
from jobsched.services.deliveries import Delivery
from jobsched.targets.registry import job, unregister
from tests.aws.conftest_worker import Kit
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def handler_slot():
    """Register a throwaway handler ``test.slot`` whose body the test supplies."""
    box: dict = {}

    @job("test.slot")
    def slot(payload, ctx):
        return box["fn"](payload, ctx)

    yield box
    unregister("test.slot")


def wait_for(predicate, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def test_lease_expiry_lets_another_worker_take_over_and_rejects_the_old_workers_late_write(
    kit, clock, handler_slot
):
    # Given worker A runs attempt 1 and stalls past its 60 s lease (no heartbeat in time)
    run, msg = kit.new_run({"handler": "test.slot"}, {})
    taken_over = {}

    def stalled(payload, ctx):
        if ctx.attempt == 1:
            clock.advance(seconds=90)  # A is frozen; SQS redelivers the message to worker B
            taken_over["out"] = kit.worker("worker-b").handle(Delivery.of(msg.to_json()), clock.now())
            return {"by": "a"}
        return {"by": "b"}

    handler_slot["fn"] = stalled
    # When A wakes up and tries to record its result
    out_a = kit.worker("worker-a").handle(Delivery.of(msg.to_json()), clock.now())
    # Then B took over as attempt 2 and succeeded; A's late write was rejected
    assert taken_over["out"].status == "succeeded" and taken_over["out"].attempt == 2
    assert out_a.status == "lease_lost"
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.SUCCEEDED and stored.output == {"by": "b"} and stored.attempt == 2
    assert [(a.attempt, a.outcome) for a in stored.attempts] == [(1, "lost"), (2, "succeeded")]
    # And each executed attempt is counted once by how it ended: A's lost attempt as failed
    counted = [kit.metrics.count(n) for n in (RUN_DURATION, RUNS_SUCCEEDED, RUNS_FAILED)]
    assert counted == [2, 1, 1]


def test_stale_owner_cannot_write_any_outcome_after_a_takeover(kit, clock):
    # Given attempt 1 claimed by A, expired, and taken over by B as attempt 2
    run, _ = kit.new_run()
    claim_a = kit.attempts.claim(run.id, 1, "worker-a", clock.now(), 60)
    clock.advance(seconds=61)
    claim_b = kit.attempts.claim(run.id, 1, "worker-b", clock.now(), 60)
    assert claim_b.took_over and claim_b.attempt == 2
    # When A tries each kind of write, Then each is rejected
    for write in (
        lambda: kit.attempts.succeed(claim_a, "worker-a", clock.now(), output=1),
        lambda: kit.attempts.retrying(claim_a, "worker-a", clock.now(), clock.now(), "x"),
        lambda: kit.attempts.dead_letter(claim_a, "worker-a", clock.now(), "x", "permanent", None),
        lambda: kit.attempts.cancelled(claim_a, "worker-a", clock.now()),
        lambda: kit.attempts.heartbeat(run.id, 1, "worker-a", clock.now(), 60),
    ):
        with pytest.raises(LeaseLostError):
            write()
    assert kit.runs.get(run.id).lease_owner == "worker-b"


def test_a_live_lease_leaves_a_duplicate_delivery_in_the_queue(kit, clock):
    # Given A holds attempt 1 with a lease until T0+60
    run, msg = kit.new_run()
    kit.attempts.claim(run.id, 1, "worker-a", clock.now(), 60)
    clock.advance(seconds=10)
    # When a duplicate delivery reaches B
    out = kit.worker("worker-b").handle(Delivery.of(msg.to_json()), clock.now())
    # Then B neither runs nor acknowledges it; it looks again after the lease
    assert out.status == "busy" and out.defer and out.detail["retry_in"] == 51
    assert kit.runs.get(run.id).lease_owner == "worker-a"


def test_an_expired_lease_with_no_attempts_left_is_dead_lettered(kit, clock):
    # Given a single-attempt run whose worker died
    run, msg = kit.new_run(max_attempts=1)
    kit.attempts.claim(run.id, 1, "worker-a", clock.now(), 60)
    clock.advance(seconds=120)
    # When the message is redelivered
    out = kit.worker("worker-b").handle(Delivery.of(msg.to_json()), clock.now())
    # Then the run is failed and dead-lettered with the reason
    assert out.status == "dead_lettered"
    item = kit.attempts.get_item(run.id)
    assert item["state"] == "failed" and item["dl_reason"] == "lease_expired" and "dl_at" in item
    # And only the dead letter is counted: the dead worker's attempt was never counted as executed
    assert (kit.metrics.count(RUNS_DEAD_LETTERED), kit.metrics.count(RUNS_FAILED)) == (1, 0)


def test_heartbeat_extends_the_lease_and_records_progress(kit, clock, handler_slot):
    # Given a handler that runs 30 s (fake) and reports progress, with a 10 ms heartbeat
    run, msg = kit.new_run({"handler": "test.slot"}, {})
    seen = {}

    def working(payload, ctx):
        clock.advance(seconds=30)
        ctx.heartbeat({"done": 1, "total": 2})
        assert wait_for(
            lambda: (
                (kit.attempts.get_item(run.id) or {}).get("progress")
                == {"done": 1, "total": 2, "unit": "steps"}
            )
        )
        seen["item"] = kit.attempts.get_item(run.id)
        return "done"

    handler_slot["fn"] = working
    # When it runs
    out = kit.worker(lease=60, heartbeat=0.01).handle(Delivery.of(msg.to_json()), clock.now())
    # Then a beat moved the lease to (now + 30 s) + 60 s and wrote the progress
    assert out.status == "succeeded"
    assert seen["item"]["lease_until"] == "2026-03-02T12:01:30.000Z"


def test_a_heartbeat_that_finds_the_run_taken_over_stops_a_cooperative_handler(kit, clock, handler_slot):
    # Given A running a cooperative handler, and B taking the run over while A runs
    run, msg = kit.new_run({"handler": "test.slot"}, {})
    stopped = threading.Event()

    def take_over() -> bool:  # A's own beats may renew the lease first: move time on until B gets it
        clock.advance(seconds=61)
        return kit.attempts.claim(run.id, 1, "worker-b", clock.now(), 60).took_over

    def cooperative(payload, ctx):
        assert wait_for(take_over)
        if wait_for(lambda: ctx.cancelled):
            stopped.set()
        return "late"

    handler_slot["fn"] = cooperative
    # When A's heartbeat runs
    out = kit.worker("worker-a", heartbeat=0.01).handle(Delivery.of(msg.to_json()), clock.now())
    # Then A's handler saw `cancelled`, and A recorded nothing over B
    assert stopped.is_set() and out.status == "lease_lost"
    assert (kit.metrics.count(RUN_DURATION), kit.metrics.count(RUNS_FAILED)) == (1, 1)
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.RUNNING and stored.lease_owner == "worker-b" and stored.attempt == 2
    assert stored.lease_until <= clock.now() + timedelta(seconds=60)


@pytest.mark.parametrize(("lease", "slack"), [(10, 5), (60, 30), (300, 30)])
def test_a_heartbeat_hides_the_message_for_the_lease_and_half_of_it_at_most_30_s_more(
    kit, clock, handler_slot, lease, slack
):
    # Given a run's message received from its queue by a worker whose lease is `lease` seconds
    sqs, url = kit.aws.clients.sqs, kit.aws.settings.queue_urls["default"]
    _, msg = kit.new_run({"handler": "test.slot"}, {})
    sqs.send_message(QueueUrl=url, MessageBody=msg.to_json())
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"][0]
    beats: list = []

    def working(payload, ctx):
        assert wait_for(lambda: beats)  # the heartbeat (every 10 ms) has beaten at this instant
        return "done"

    handler_slot["fn"] = working
    worker = kit.worker(lease=lease, heartbeat=0.01)
    real_beat = worker.attempts.heartbeat

    def beat(*args, **kwargs):
        beats.append(clock.now())
        return real_beat(*args, **kwargs)

    worker.attempts.heartbeat = beat  # type: ignore[method-assign]
    # When it runs and beats (the worker then dies: nothing deletes the message)
    delivery = Delivery(got["MessageId"], got["Body"], got["ReceiptHandle"], url, 1)
    assert worker.handle(delivery, clock.now()).status == "succeeded"
    # Then the message stays hidden until `slack` seconds after the lease would end, not 30 s for
    # every lease: a short lease's run is taken over soon after it expires
    clock.advance(seconds=lease + slack - 1)
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages", []) == []
    clock.advance(seconds=2)
    again = sqs.receive_message(QueueUrl=url).get("Messages", [])
    assert [m["MessageId"] for m in again] == [got["MessageId"]]
