"""Run operations: cancel (queued, retrying, running), retry a failed run, tenant isolation, outputs."""

from __future__ import annotations

import json
import threading

import pytest

from jobsched.core.errors import ConflictError, NotFoundError
from jobsched.core.models import RunState
from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import Kit, fail_permanently, run_service, sent_messages
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def service(kit):
    return run_service(kit)


def test_cancel_of_a_queued_run_is_immediate_and_its_delivery_does_nothing(kit, service, clock):
    # Given a queued run whose message is in flight
    run, msg = kit.new_run()
    # When it is cancelled
    cancelled = service.cancel("acme", run.id, clock.now())
    # Then it is cancelled at once, and the later delivery is acknowledged without running
    assert cancelled.state is RunState.CANCELLED and cancelled.finished_at == clock.now()
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    assert out.status == "finished" and kit.runs.get(run.id).output is None


def test_cancel_of_a_running_run_is_seen_by_the_heartbeat_and_the_handler_stops(kit, service, clock):
    # Given demo.sleep running for up to 30 s with a 10 ms heartbeat
    run, msg = kit.new_run({"handler": "demo.sleep"}, {"seconds": 30})
    result = {}
    worker = kit.worker(heartbeat=0.01)
    thread = threading.Thread(
        target=lambda: result.setdefault("out", worker.handle(Delivery.of(msg.to_json()), clock.now()))
    )
    thread.start()
    try:
        for _ in range(300):
            if kit.runs.get(run.id).state is RunState.RUNNING:
                break
            threading.Event().wait(0.01)
        # When the run is cancelled while running
        flagged = service.cancel("acme", run.id, clock.now())
        assert flagged.state is RunState.RUNNING and flagged.cancel_requested
    finally:
        thread.join(10)
    # Then the handler stopped early and the run ended cancelled
    assert result["out"].status == "cancelled"
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.CANCELLED and stored.attempts[-1].outcome == "cancelled"


def test_cancel_of_a_retrying_run_is_immediate_and_the_retry_message_does_nothing(kit, service, clock, aws):
    run, msg = kit.new_run({"handler": "demo.fail"}, {}, base_seconds=0, max_seconds=0)
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    assert service.cancel("acme", run.id, clock.now()).state is RunState.CANCELLED
    [(retry_body, _)] = sent_messages(aws)
    assert kit.worker().handle(Delivery.of(json.dumps(retry_body)), clock.now()).status == "finished"


def test_cancel_of_a_finished_run_is_a_conflict(kit, service, clock):
    run, msg = kit.new_run()
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    with pytest.raises(ConflictError, match="succeeded"):
        service.cancel("acme", run.id, clock.now())


def test_another_tenants_run_is_not_found(kit, service, clock):
    run, _ = kit.new_run()
    with pytest.raises(NotFoundError):
        service.get("other-tenant", run.id)
    with pytest.raises(NotFoundError):
        service.cancel("other-tenant", run.id, clock.now())
    assert kit.runs.get(run.id).state is RunState.QUEUED


def test_retry_of_a_failed_run_queues_the_next_attempt_with_a_fresh_budget(kit, service, clock, aws):
    # Given a run dead-lettered after one permanent failure
    run, _ = fail_permanently(kit, max_attempts=2)
    clock.advance(minutes=5)
    # When it is retried
    queued = service.retry("acme", run.id, clock.now())
    # Then it is queued again, out of the dead letters, with attempt 2 on its way and the retry recorded
    assert queued.state is RunState.QUEUED and queued.max_attempts == 3 and queued.dead_lettered_at is None
    assert queued.replays == [
        {"action": "retry", "at": "2026-03-02T12:05:00.000Z", "from_attempt": 1, "payload_changed": False}
    ]
    [(body, delay)] = sent_messages(aws)
    assert body["attempt"] == 2 and delay == 0
    assert kit.runs.list_dead_letters("acme")[0] == []


def test_retry_of_a_run_that_did_not_fail_is_a_conflict(kit, service, clock):
    run, _ = kit.new_run()
    with pytest.raises(ConflictError, match="only failed runs"):
        service.retry("acme", run.id, clock.now())


def test_output_is_read_from_s3_when_large(kit, service, clock):
    run, msg = kit.new_run(payload={"blob": "y" * 5000})
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    assert service.output("acme", run.id) == {"blob": "y" * 5000}
