"""The DLQ consumer's Lambda entry point."""

from __future__ import annotations

import pytest

import functions.dlq_consumer as dlq_function
from jobsched.core.models import RunState
from jobsched.local.invoke import LambdaContext
from tests.aws.conftest_worker import Kit
from tests.services.test_dlq import redrive_to_dlq


@pytest.fixture
def kit(aws_environ, clock):
    with dlq_function.seam.installed(clock=clock):
        yield Kit(aws_environ, clock)


def test_a_redriven_message_becomes_a_failed_run_through_the_function(kit, clock, aws_environ):
    # Given a poison message in the default queue's DLQ
    run, msg = kit.new_run()
    message = redrive_to_dlq(aws_environ, msg.to_json())
    dlq_arn = aws_environ.clients.sqs.get_queue_attributes(
        QueueUrl=aws_environ.settings.dlq_urls["default"], AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    event = {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": message["Attributes"],
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": dlq_arn,
                "awsRegion": "us-east-1",
            }
        ]
    }
    # When the DLQ consumer function handles it
    response = dlq_function.handler(event, LambdaContext("dlq_consumer", 60))
    # Then it is acknowledged and the run is failed with reason poison
    assert response["batchItemFailures"] == []
    item = kit.attempts.get_item(run.id)
    assert item["state"] == RunState.FAILED and item["dl_reason"] == "poison"
