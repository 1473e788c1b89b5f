"""What the worker side costs per run, by the metering rules (jobsched.aws.metering)."""

from __future__ import annotations

from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import Kit
from tests.aws.memory import memory_aws_units  # noqa: F401  (on the in-memory fakes)


def test_a_successful_cron_run_costs_two_single_unit_writes_on_the_worker_side(aws, clock):
    # Given a cron run with a 1 KB payload (it travels in the message, not in the run item) and a
    # small output
    kit = Kit(aws, clock)
    _, msg = kit.new_run({"handler": "demo.flaky"}, {"failures": 0, "data": "x" * 1000})
    kit.meter.reset()
    # When a worker claims and completes it
    assert kit.worker().handle(Delivery.of(msg.to_json()), clock.now()).status == "succeeded"
    # Then the worker made two UpdateItems of one write unit each, no read, and no index write
    snap = kit.meter.snapshot()
    assert snap["requests"] == {"dynamodb.UpdateItem": 2}
    assert snap["dynamodb"]["wcu"] == 2.0 and snap["dynamodb"]["rcu"] == 0.0


def test_a_retry_counts_its_send_message_on_the_worker_meter(aws, clock):
    # Given a run whose first attempt fails with a retryable error
    kit = Kit(aws, clock)
    _, msg = kit.new_run({"handler": "demo.flaky"}, {"failures": 1})
    kit.meter.reset()
    # When a worker handles it
    assert kit.worker().handle(Delivery.of(msg.to_json()), clock.now()).status == "retrying"
    # Then the retry's SendMessage went through the metered queues, beside the two run writes
    requests = kit.meter.snapshot()["requests"]
    assert requests.get("sqs.SendMessage") == 1
    assert requests.get("dynamodb.UpdateItem") == 2
