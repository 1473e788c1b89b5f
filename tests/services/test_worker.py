"""Worker: claim, execute, record; each test names the guarantee it proves."""

from __future__ import annotations

import pytest

from jobsched.core.models import RunState
from jobsched.runtime.observability import RUNS_SUCCEEDED, SCHEDULE_LAG
from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import Kit
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


def test_a_claimed_run_succeeds_with_its_output_inline(kit, clock):
    # Given a queued run of demo.echo
    run, msg = kit.new_run(payload={"n": 1})
    # When a worker processes its message
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    # Then the run succeeded with the output on the item, one attempt recorded
    assert out.status == "succeeded"
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.SUCCEEDED and stored.output == {"n": 1}
    assert [(a.attempt, a.outcome) for a in stored.attempts] == [(1, "succeeded")]
    assert stored.lease_owner is None and stored.lease_until is None
    assert kit.metrics.count(RUNS_SUCCEEDED) == 1 and kit.metrics.points[SCHEDULE_LAG] == [0.0]


def test_guarantee_2_redelivery_after_a_crash_before_the_ack_does_nothing_new(kit, clock):
    # Given a run that succeeded but whose message was not acknowledged (crash after the work)
    run, msg = kit.new_run()
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    before = kit.runs.get(run.id)
    # When the same message is delivered again
    clock.advance(seconds=120)
    out = kit.worker("worker-b").handle(Delivery.of(msg.to_json()), clock.now())
    # Then it is acknowledged without running the target or writing the run
    assert out.status == "finished" and not out.defer
    assert kit.runs.get(run.id) == before
    assert kit.metrics.count(RUNS_SUCCEEDED) == 1


def test_large_output_goes_to_s3_with_the_link_on_the_run(kit, clock, aws):
    # Given an echo whose output is over the inline limit
    big = {"blob": "x" * 5000}
    run, msg = kit.new_run(payload=big)
    # When it runs
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    # Then the run holds only the S3 key, and the object holds the output
    stored = kit.runs.get(run.id)
    assert stored.output is None and stored.output_ref.startswith("outputs/acme/job1/")
    assert kit.outputs.get_json(stored.output_ref) == big


def test_a_message_before_its_due_instant_is_resent_with_the_remaining_delay(kit, clock):
    # Given a message due in 2000 s (over the SQS delay cap)
    from datetime import timedelta

    run, msg = kit.new_run()
    early = msg.__class__(**{**msg.__dict__, "due_at": clock.now() + timedelta(seconds=2000)})
    # When it is delivered now
    out = kit.worker().handle(Delivery.of(early.to_json()), clock.now())
    # Then the run is untouched and the message is re-sent (nothing claimed)
    assert out.status == "redelayed"
    assert kit.runs.get(run.id).state is RunState.QUEUED
    sent = kit.aws.clients.sqs.get_queue_attributes(
        QueueUrl=kit.aws.settings.queue_url("default"), AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    assert sent["ApproximateNumberOfMessagesDelayed"] == "1"


def test_payload_override_from_a_replay_wins_over_the_message_payload(kit, clock):
    run, msg = kit.new_run(payload={"v": "original"})
    kit.dynamo.update(
        kit.aws.settings.runs_table,
        {"job_id": run.job_id, "run_key": run.run_key},
        "SET payload_override = :p",
        values={":p": {"v": "fixed"}},
    )
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    assert kit.runs.get(run.id).output == {"v": "fixed"}


def test_malformed_message_raises_so_sqs_redrives_it(kit, clock):
    from jobsched.core.errors import ValidationError

    with pytest.raises(ValidationError):
        kit.worker().handle(Delivery.of("{not json"), clock.now())


def test_a_delivery_with_too_little_invocation_time_left_is_deferred_unclaimed(kit, clock):
    # Given a 30 s run delivered to an invocation with 20 s left
    run, msg = kit.new_run(timeout_seconds=30)
    # When the worker looks at it
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now(), remaining_seconds=20)
    # Then it is left in the queue for another invocation, and the run is not claimed
    assert out.status == "no_time" and out.defer
    assert kit.runs.get(run.id).state is RunState.QUEUED
