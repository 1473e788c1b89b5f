"""The worker's Lambda entry point: SQS events in, partial batch responses out."""

from __future__ import annotations

import pytest

import functions.worker as worker_function
from jobsched.core.models import RunState
from jobsched.local.invoke import LambdaContext
from tests.aws.conftest_worker import Kit


@pytest.fixture
def kit(aws_environ, clock, monkeypatch):
    monkeypatch.setattr(worker_function, "clock", clock)
    worker_function.environment.cache_clear()
    yield Kit(aws_environ, clock)
    worker_function.environment.cache_clear()


def sqs_event(aws, bodies: list[str]) -> dict:
    """Send ``bodies`` to the default queue and receive them back as a Lambda SQS event."""
    sqs, url = aws.clients.sqs, aws.settings.queue_url("default")
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="acme")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert len(messages) == len(bodies)
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


def test_one_deferred_record_does_not_fail_the_batch(kit, clock, aws_environ):
    # Given a fresh run, a run held by another worker's live lease, and a malformed message
    fresh, fresh_msg = kit.new_run(job_id="fresh")
    held, held_msg = kit.new_run(job_id="held")
    kit.attempts.claim(held.id, 1, "someone-else", clock.now(), 60)
    event = sqs_event(aws_environ, [fresh_msg.to_json(), held_msg.to_json(), "{broken"])
    ids = {r["body"]: r["messageId"] for r in event["Records"]}
    # When the worker function handles the batch
    response = worker_function.handler(event, LambdaContext("worker", 900))
    # Then only the held and the malformed records are reported failed; the fresh run succeeded
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {ids[held_msg.to_json()], ids["{broken"]}
    assert kit.runs.get(fresh.id).state is RunState.SUCCEEDED
    assert kit.runs.get(held.id).lease_owner == "someone-else"


def test_a_permanent_failure_is_acknowledged_and_dead_lettered(kit, clock, aws_environ):
    # Given a run that fails permanently
    run, msg = kit.new_run({"handler": "demo.fail"}, {"kind": "permanent"})
    # When the function handles it
    response = worker_function.handler(sqs_event(aws_environ, [msg.to_json()]), LambdaContext("worker", 900))
    # Then the record is acknowledged (no retry by SQS) and the run is a dead letter
    assert response["batchItemFailures"] == []
    item = kit.attempts.get_item(run.id)
    assert item["state"] == "failed" and item["dl_reason"] == "permanent"


def test_each_invocation_owns_its_leases():
    first, second = LambdaContext("worker", 900), LambdaContext("worker", 900)
    owners = {f"worker:{c.aws_request_id}" for c in (first, second)}
    assert len(owners) == 2
