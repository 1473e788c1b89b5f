"""Guarantee 4: a poison message (received maxReceiveCount times without success) is redriven by SQS
to the DLQ and the DLQ consumer records its run as failed, in the dead letters, reason ``poison``."""

from __future__ import annotations

import json

import pytest

from jobsched.core.models import RunState
from jobsched.runtime import resources as r
from jobsched.runtime.observability import POISON_MESSAGES
from jobsched.services.dead_letters import DeadLetterService
from jobsched.services.deliveries import Delivery
from jobsched.services.dlq_consumer import DlqConsumer
from tests.aws.conftest_worker import Kit, run_service
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


def redrive_to_dlq(aws, body: str) -> dict:
    """Send ``body`` to the default queue and receive it without deleting until SQS moves it to the DLQ
    (each receive is a worker that crashed on it); return the DLQ message."""
    sqs, queue = aws.clients.sqs, aws.settings.queue_url("default")
    sqs.send_message(QueueUrl=queue, MessageBody=body, MessageGroupId="acme")
    max_receives = next(q.max_receive_count for q in r.QUEUES if q.kind == "default")
    for _ in range(max_receives):
        assert sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0).get("Messages")
    assert not sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0).get("Messages")
    [message] = sqs.receive_message(
        QueueUrl=aws.settings.dlq_urls["default"], AttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    return message


def test_poison_message_is_redriven_and_recorded_as_a_failed_run(kit, clock, aws):
    # Given a queued run whose message crashed every worker that received it
    run, msg = kit.new_run()
    dlq_message = redrive_to_dlq(aws, msg.to_json())
    # When the DLQ consumer handles the redriven message
    out = DlqConsumer(kit.attempts, kit.metrics).process(dlq_message["Body"], clock.now(), receive_count=5)
    # Then the run is failed with reason poison, and it is a replayable dead letter
    assert out.status == "dead_lettered"
    assert kit.runs.get(run.id).state is RunState.FAILED
    [view] = DeadLetterService(run_service(kit)).list("acme")[0]
    assert view["run_id"] == run.id and view["reason"] == "poison" and "received 5 times" in view["error"]
    assert view["payload"] == {"hello": "world"}
    assert kit.metrics.count(POISON_MESSAGES) == 1


def test_a_redriven_message_of_a_finished_run_changes_nothing(kit, clock):
    run, msg = kit.new_run()
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    out = DlqConsumer(kit.attempts).process(msg.to_json(), clock.now())
    assert out.status == "finished" and kit.runs.get(run.id).state is RunState.SUCCEEDED


def test_a_run_under_a_live_lease_is_left_for_later(kit, clock):
    run, msg = kit.new_run()
    kit.attempts.claim(run.id, 1, "worker-a", clock.now(), 60)
    out = DlqConsumer(kit.attempts).process(msg.to_json(), clock.now())
    assert out.status == "busy" and out.defer and kit.runs.get(run.id).state is RunState.RUNNING


def test_malformed_message_naming_a_run_fails_that_run(kit, clock):
    run, _ = kit.new_run()
    body = json.dumps({"v": 99, "run_id": run.id})
    out = DlqConsumer(kit.attempts).process(body, clock.now())
    assert out.status == "dead_lettered" and "malformed" in out.detail["error"]


def test_unidentifiable_message_is_dropped_with_a_log(kit, clock):
    assert DlqConsumer(kit.attempts).process("garbage", clock.now()).status == "unidentified"


def test_a_poison_message_of_a_bound_run_keeps_its_version_in_the_dead_letter(kit, clock, aws):
    # Given a retrying run bound to demo.echo version 1 whose unbound message became poison (decision 0048)
    run, msg = kit.new_run()
    claim = kit.attempts.claim(run.id, 1, "worker-a", clock.now(), 60)
    kit.dynamo.update(
        aws.settings.runs_table,
        {"job_id": run.job_id, "run_key": run.run_key},
        "SET handler_version = :v",
        values={":v": 1},
    )
    kit.attempts.retrying(claim, "worker-a", clock.now(), clock.now(), "boom")
    # When the DLQ consumer records it
    DlqConsumer(kit.attempts).process(msg.to_json(), clock.now())
    # Then the dead letter's target names the version, so a replay runs it
    [view] = DeadLetterService(run_service(kit)).list("acme")[0]
    assert view["target"] == {"handler": "demo.echo", "version": 1}
