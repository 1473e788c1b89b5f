"""The queue port's contract: jobsched.testing.InMemoryQueues and SQS (moto, its clock following the
test's) answer the calls of jobsched.aws.queues alike: delay, visibility, receive count, redrive."""

from __future__ import annotations

import pytest

from jobsched.aws.errors import AwsRefused, aws_call
from jobsched.aws.metering import Meter
from jobsched.aws.queues import RunQueues, change_visibility
from jobsched.core.messages import Outgoing, RunMessage
from tests.aws.conftest import T0


def url(backend, kind="default"):
    return backend.settings.queue_urls[kind]


def receive(backend, kind="default", **kwargs):
    kwargs.setdefault("MaxNumberOfMessages", 10)
    answer = backend.sqs.receive_message(QueueUrl=url(backend, kind), AttributeNames=["All"], **kwargs)
    return answer.get("Messages", [])


def counts(backend, kind="default"):
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateNumberOfMessagesNotVisible",
    ]
    attributes = backend.sqs.get_queue_attributes(QueueUrl=url(backend, kind), AttributeNames=names)[
        "Attributes"
    ]
    return tuple(int(attributes[n]) for n in names)


def test_a_delayed_message_shows_when_the_clock_passes_its_delay(backend):
    backend.sqs.send_message(QueueUrl=url(backend), MessageBody="later", DelaySeconds=30, MessageGroupId="t1")
    backend.sqs.send_message(QueueUrl=url(backend), MessageBody="now", MessageGroupId="t1")
    assert counts(backend) == (1, 1, 0)
    [first] = receive(backend, VisibilityTimeout=300)
    assert first["Body"] == "now"
    assert first["Attributes"]["MessageGroupId"] == "t1"
    backend.clock.advance(seconds=31)
    assert [m["Body"] for m in receive(backend)] == ["later"]


def test_a_received_message_is_hidden_for_its_visibility_and_counts_each_receive(backend):
    backend.sqs.send_message(QueueUrl=url(backend), MessageBody="m")
    [got] = receive(backend, VisibilityTimeout=20)
    assert got["Attributes"]["ApproximateReceiveCount"] == "1"
    assert receive(backend) == []
    assert counts(backend) == (0, 0, 1)
    backend.clock.advance(seconds=21)
    [again] = receive(backend, VisibilityTimeout=20)
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"
    assert again["ReceiptHandle"] != got["ReceiptHandle"]


def test_visibility_changes_move_the_instant_and_zero_shows_it_at_once(backend):
    backend.sqs.send_message(QueueUrl=url(backend), MessageBody="m")
    [got] = receive(backend, VisibilityTimeout=5)
    change_visibility(backend.sqs, url(backend), got["ReceiptHandle"], 100)
    backend.clock.advance(seconds=50)
    assert receive(backend) == []
    backend.clock.advance(seconds=51)
    [back] = receive(backend, VisibilityTimeout=30)
    change_visibility(backend.sqs, url(backend), back["ReceiptHandle"], 0)
    backend.clock.advance(seconds=0.001)  # moto shows it only after its instant; SQS and the fake at it
    assert [m["Body"] for m in receive(backend)] == ["m"]


def test_a_message_received_max_receive_count_times_goes_to_the_dead_letter_queue(backend):
    from jobsched.runtime.resources import QUEUES

    limit = next(spec.max_receive_count for spec in QUEUES if spec.kind == "default")
    backend.sqs.send_message(QueueUrl=url(backend), MessageBody="poison")
    for _ in range(limit):
        [got] = receive(backend, VisibilityTimeout=1)
        backend.clock.advance(seconds=2)
    assert got["Attributes"]["ApproximateReceiveCount"] == str(limit)
    assert receive(backend) == []  # moved on this receive, not delivered again
    dead = backend.sqs.receive_message(QueueUrl=backend.settings.dlq_urls["default"], MaxNumberOfMessages=10)
    assert [m["Body"] for m in dead["Messages"]] == ["poison"]


def test_a_deleted_message_is_gone_and_its_old_handle_is_refused_for_visibility(backend):
    backend.sqs.send_message(QueueUrl=url(backend), MessageBody="m")
    [got] = receive(backend, VisibilityTimeout=1)
    backend.clock.advance(seconds=2)
    [again] = receive(backend, VisibilityTimeout=1)
    backend.sqs.delete_message(QueueUrl=url(backend), ReceiptHandle=again["ReceiptHandle"])
    backend.sqs.delete_message(QueueUrl=url(backend), ReceiptHandle=again["ReceiptHandle"])  # twice: fine
    backend.clock.advance(seconds=2)
    assert receive(backend) == []
    with pytest.raises(AwsRefused) as error:
        change_visibility(backend.sqs, url(backend), got["ReceiptHandle"], 10)
    assert error.value.code == "ReceiptHandleIsInvalid"


def test_a_visibility_batch_shows_its_messages_at_once_and_reports_a_handle_not_held(backend):
    """RunQueues.set_visibility_batch (the fair share's refusal, decision 0057): the held messages'
    visibility changes in one ChangeMessageVisibilityBatch per ten handles, a handle SQS refuses (its
    message deleted) comes back as refused, and the others are visible at once."""
    meter = Meter()
    queues = RunQueues(backend.sqs, backend.settings.queue_urls, meter)
    for i in range(12):
        backend.sqs.send_message(QueueUrl=url(backend), MessageBody=f"m{i}")
    got = receive(backend, VisibilityTimeout=300) + receive(backend, VisibilityTimeout=300)
    assert len(got) == 12
    gone = got[0]["ReceiptHandle"]
    backend.sqs.delete_message(QueueUrl=url(backend), ReceiptHandle=gone)
    handles = [m["ReceiptHandle"] for m in got]
    assert queues.set_visibility_batch(url(backend), handles, 0) == {gone}
    assert meter.requests["sqs.ChangeMessageVisibilityBatch"] == 2  # ten handles, then two
    assert "sqs.ChangeMessageVisibility" not in meter.requests
    backend.clock.advance(seconds=0.001)  # moto shows them only after their instant; SQS and the fake at it
    back = receive(backend) + receive(backend)
    assert sorted(m["Body"] for m in back) == sorted(f"m{i}" for i in range(1, 12))


@pytest.mark.parametrize(
    ("count", "same_id", "code"),
    [
        (0, False, "EmptyBatchRequest"),
        (11, False, "TooManyEntriesInBatchRequest"),
        (2, True, "BatchEntryIdsNotDistinct"),
    ],
)
def test_a_visibility_batch_empty_over_ten_or_with_an_id_twice_is_refused(backend, count, same_id, code):
    """SQS refuses such a ChangeMessageVisibilityBatch whole, as the fake does; moto changes what it
    can (RunQueues never sends one: ten entries at most, ids 0-9)."""
    if backend.kind == "moto":
        pytest.skip("moto does not check a visibility batch's entries: the fake follows SQS")
    backend.sqs.send_message(QueueUrl=url(backend), MessageBody="m")
    [got] = receive(backend, VisibilityTimeout=300)
    entries = [
        {"Id": "0" if same_id else str(i), "ReceiptHandle": got["ReceiptHandle"], "VisibilityTimeout": 0}
        for i in range(count)
    ]
    with pytest.raises(AwsRefused) as error:
        aws_call(backend.sqs.change_message_visibility_batch, QueueUrl=url(backend), Entries=entries)
    assert error.value.code == code


def test_a_delay_over_900_seconds_and_a_batch_over_10_entries_are_refused(backend):
    with pytest.raises(AwsRefused) as error:
        aws_call(backend.sqs.send_message, QueueUrl=url(backend), MessageBody="m", DelaySeconds=901)
    assert error.value.code == "InvalidParameterValue"
    entries = [{"Id": str(i), "MessageBody": "m"} for i in range(11)]
    with pytest.raises(AwsRefused) as error:
        aws_call(backend.sqs.send_message_batch, QueueUrl=url(backend), Entries=entries)
    assert (
        error.value.code == "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
        or error.value.code.endswith("TooManyEntriesInBatchRequest")
    )


def test_run_queues_send_batches_with_delays_and_groups(backend):
    queues = RunQueues(backend.sqs, backend.settings.queue_urls)
    outgoing = []
    for i in range(12):
        message = RunMessage(
            run_id=f"j{i}.r",
            job_id=f"j{i}",
            tenant=f"t{i % 3}",
            attempt=1,
            scheduled_at=T0,
            due_at=T0,
            target={"type": "python", "handler": "echo"},
            payload={"i": i},
        )
        outgoing.append(Outgoing(queue="default", message=message, delay_seconds=i * 10))
    report = queues.send(outgoing)
    assert sorted(report.sent) == sorted(o.key for o in outgoing) and not report.failed
    assert queues.visible_messages("default") == 1
    backend.clock.advance(seconds=55)
    assert queues.visible_messages("default") == 6
    got = receive(backend)
    assert sorted(m["Attributes"]["MessageGroupId"] for m in got) == ["t0", "t0", "t1", "t1", "t2", "t2"]


def test_a_consumer_receives_with_the_receive_count_makes_visible_again_and_deletes(backend):
    # Given a message on the container queue and a consumer of that queue
    from jobsched.aws.queues import QueueConsumer

    consumer = QueueConsumer(backend.sqs, url(backend, "container"))
    backend.sqs.send_message(QueueUrl=url(backend, "container"), MessageBody="run", MessageGroupId="t1")
    # When it is received, made visible at once (a hand-back) and received again
    [first] = consumer.receive(10, 0)
    assert consumer.receive(10, 0) == []
    assert consumer.set_visibility(first.receipt_handle, 0) is True
    backend.clock.advance(seconds=0.001)  # moto shows it only after its instant; SQS and the fake at it
    [second] = consumer.receive(10, 0)
    # Then the second receive counts 2, and a delete with its handle empties the queue
    assert (first.body, first.receive_count, second.receive_count) == ("run", 1, 2)
    assert second.message_id == first.message_id
    assert consumer.delete(second.receipt_handle) is True
    assert counts(backend, "container") == (0, 0, 0)
