"""The embedded mode's fair poller against moto's SQS: fair hand-out order, visibility kept while held."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobsched.local.fair_poller import FairQueuePoller


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.02)
    return value


class Blocking:
    """A handler that records each batch's bodies and blocks the first one until ``release``.

    While it blocks, it extends its own records' visibility every second (``heartbeat``: the SQS
    client and queue URL), as the worker's heartbeat does, so only the messages the poller holds
    depend on the poller to stay invisible."""

    def __init__(self, heartbeat: tuple[Any, str] | None = None) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.release = threading.Event()
        self.heartbeat = heartbeat

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        self.batches.append(event["Records"])
        if len(self.batches) == 1:
            deadline = time.monotonic() + 40
            while not self.release.wait(1.0) and time.monotonic() < deadline:
                if self.heartbeat is not None:
                    sqs, url = self.heartbeat
                    for record in event["Records"]:
                        sqs.change_message_visibility(
                            QueueUrl=url,
                            ReceiptHandle=record["receiptHandle"],
                            VisibilityTimeout=HELD_VISIBILITY,
                        )
        return {"batchItemFailures": []}

    def bodies(self) -> list[list[str]]:
        return [[r["body"] for r in batch] for batch in self.batches]


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def start_poller(
    sqs: Any, visibility: int, handler: Blocking
) -> tuple[FairQueuePoller, str, threading.Event]:
    url = sqs.create_queue(QueueName="fair", Attributes={"VisibilityTimeout": str(visibility)})["QueueUrl"]
    stop = threading.Event()
    poller = FairQueuePoller(
        sqs=sqs,
        queue_url=url,
        queue_arn="arn:aws:sqs:us-east-1:123456789012:fair",
        invoke=handler,
        slots=1,
        stop=stop,
        wait_seconds=0,
        idle_seconds=0.02,
    )
    return poller, url, stop


def warm_up(sqs: Any) -> None:
    """Every SQS operation the poller and the handler use, once, on a scratch queue: the first call of
    each in a process loads its models (the serial session's first test, right after the parallel run,
    is where a held message came back late)."""
    url = sqs.create_queue(QueueName="warm-up")["QueueUrl"]
    send(sqs, url, "w", 2)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, AttributeNames=["All"])["Messages"]
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)]
    sqs.change_message_visibility_batch(
        QueueUrl=url, Entries=[{**e, "VisibilityTimeout": 5} for e in entries]
    )
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=entries[0]["ReceiptHandle"], VisibilityTimeout=5
    )
    sqs.delete_message_batch(QueueUrl=url, Entries=entries)
    sqs.delete_queue(QueueUrl=url)


def send(sqs: Any, url: str, group: str, count: int) -> None:
    for start in range(0, count, 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "MessageBody": f"{group}-{i}", "MessageGroupId": group}
                for i in range(start, min(count, start + 10))
            ],
        )


def test_a_quiet_tenants_message_sent_behind_a_backlog_goes_out_in_the_next_batch(sqs: Any) -> None:
    """Given one worker slot busy with tenant a's first batch, 30 more of a's messages queued, and
    then one message of tenant b (moto returns it last)
    When the slot frees
    Then the next batch starts with b's message and is filled up with a's."""
    handler = Blocking()
    poller, url, stop = start_poller(sqs, 30, handler)
    send(sqs, url, "a", 40)
    poller.start()
    try:
        wait_for(lambda: handler.batches)
        send(sqs, url, "b", 1)
        wait_for(lambda: poller.held == 31)
        handler.release.set()
        wait_for(lambda: sum(len(b) for b in handler.batches) == 41)
    finally:
        stop.set()
        poller.join(5)
    bodies = handler.bodies()
    assert bodies[0] == [f"a-{i}" for i in range(10)]
    assert bodies[1][0] == "b-0"
    assert len(bodies[1]) == 10 and all(b.startswith("a-") for b in bodies[1][1:])


# Real time: the poller extends the visibility of the messages it holds once a third of it is spent.
# This test failed now and then with a message received twice (ApproximateReceiveCount 2) at 3, 6 and
# 10 s (2026-12-05 and 12-06, clean-clone CIs and the serial session), taken then for an extension come
# late, so the timeout grew to 15 s (a 32 s test). The likelier cause was moto's receive race, fixed
# since (decision 0042, sqs-receive-loses-messages): two of the poller's receivers scanning the queue
# at once could both take a fresh message. On 2026-12-07 with 3 s, without the fix: 1 of 6 runs beside
# a clean-clone CI failed so (none of 24 more, idle or beside two busy loops: the race is rare); with
# it, 0 of 20 beside the CI, and 0 of 10 at 5 s beside the CI's serial part. 6 s leaves a late
# extension 4 s; what the test asserts is the same.
HELD_VISIBILITY = 6


@pytest.mark.serial
def test_held_messages_stay_invisible_past_the_visibility_timeout_and_are_delivered_once(sqs: Any) -> None:
    """Given a queue with a HELD_VISIBILITY (6 s) visibility timeout and one slot, whose first batch
    blocks for 13 s (extending its own records' visibility, as the worker does) while 20 more messages
    are held by the poller
    When the batch ends and the held messages go out
    Then each message was delivered exactly once, all with ApproximateReceiveCount 1 (none expired
    while held and came back), and the queue is empty."""
    warm_up(sqs)
    handler = Blocking()
    poller, url, stop = start_poller(sqs, HELD_VISIBILITY, handler)
    handler.heartbeat = (sqs, url)
    send(sqs, url, "a", 30)
    poller.start()
    try:
        wait_for(lambda: handler.batches and poller.held == 20)
        time.sleep(2 * HELD_VISIBILITY + 1)  # more than two visibility timeouts with the messages held
        handler.release.set()
        wait_for(lambda: sum(len(b) for b in handler.batches) >= 30)
        time.sleep(0.5)  # a redelivery, if any, would show up now
    finally:
        stop.set()
        poller.join(5)
    records = [r for batch in handler.batches for r in batch]
    assert sorted(r["body"] for r in records) == sorted(f"a-{i}" for i in range(30))
    assert {r["attributes"]["ApproximateReceiveCount"] for r in records} == {"1"}
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
