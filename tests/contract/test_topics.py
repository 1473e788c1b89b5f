"""SNS's contract: jobsched.testing.InMemoryTopics and moto's SNS answer the calls the dead-letter
notifications and their tests make alike (topics, SQS subscriptions, publish). Each test runs on both
(``[memory]``, ``[moto]``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from jobsched.aws.clients import Clients
from jobsched.testing import in_memory_aws
from tests.aws.conftest import REGION, _fake_credentials


@pytest.fixture(params=["memory", "moto"])
def clients(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    if request.param == "memory":
        yield in_memory_aws().clients
        return
    _fake_credentials(monkeypatch)
    with mock_aws():
        yield Clients(region_name=REGION)


def subscribed_queue(clients: Any, topic_arn: str, name: str, raw: bool) -> str:
    url = clients.sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    clients.sns.subscribe(
        TopicArn=topic_arn, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": str(raw).lower()}
    )
    return url


def bodies(clients: Any, url: str) -> list[str]:
    got = clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [m["Body"] for m in got]


def test_a_topic_is_named_by_an_arn_and_created_once(clients):
    first = clients.sns.create_topic(Name="team-payments")["TopicArn"]
    again = clients.sns.create_topic(Name="team-payments")["TopicArn"]
    assert first == again == "arn:aws:sns:us-east-1:123456789012:team-payments"


def test_a_published_message_reaches_each_subscribed_queue_raw_or_in_its_envelope(clients):
    # Given a topic with one raw and one enveloped SQS subscription
    arn = clients.sns.create_topic(Name="team-payments")["TopicArn"]
    raw = subscribed_queue(clients, arn, "raw", raw=True)
    wrapped = subscribed_queue(clients, arn, "wrapped", raw=False)
    # When a message is published
    message_id = clients.sns.publish(TopicArn=arn, Message='{"run_id":"r1"}', Subject="dead letter")[
        "MessageId"
    ]
    # Then the raw queue holds the message itself, the other SNS's envelope around it
    assert bodies(clients, raw) == ['{"run_id":"r1"}']
    [envelope] = [json.loads(b) for b in bodies(clients, wrapped)]
    assert envelope["Type"] == "Notification" and envelope["MessageId"] == message_id
    assert (envelope["TopicArn"], envelope["Subject"], envelope["Message"]) == (
        arn,
        "dead letter",
        '{"run_id":"r1"}',
    )


def test_publishing_to_a_topic_that_does_not_exist_is_refused(clients):
    with pytest.raises(Exception) as refused:
        clients.sns.publish(TopicArn="arn:aws:sns:us-east-1:123456789012:nowhere", Message="m")
    assert refused.value.response["Error"]["Code"] == "NotFound"
