"""SQS: high/default/low/long, each with its DLQ (redrive), SSE, TLS-only, visibility >= 6x timeout."""

from __future__ import annotations

import pytest

from infra.functions import function_spec
from infra.queues import DLQ_CONSUMER, QUEUE_CONSUMER, VISIBILITY_FACTOR
from jobsched.runtime.resources import QUEUES, QueueSpec


def _props(synth, queue) -> dict:
    return synth.template["Resources"][synth.logical_id(queue)]["Properties"]


def test_queue_count_is_four_queues_four_dlqs_and_the_scheduler_dlq(synth):
    synth.assertions.resource_count_is("AWS::SQS::Queue", 2 * len(QUEUES) + 1)


@pytest.mark.parametrize("spec", QUEUES, ids=lambda s: s.kind)
def test_queue_redrives_to_its_own_dlq(synth, spec: QueueSpec):
    queues = synth.stack.queues
    redrive = _props(synth, queues.queue(spec.kind))["RedrivePolicy"]
    assert redrive["maxReceiveCount"] == spec.max_receive_count
    assert redrive["deadLetterTargetArn"] == {"Fn::GetAtt": [synth.logical_id(queues.dlq(spec.kind)), "Arn"]}


@pytest.mark.parametrize("spec", QUEUES, ids=lambda s: s.kind)
def test_queue_and_dlq_retention_follow_the_spec(synth, spec: QueueSpec):
    queues = synth.stack.queues
    assert _props(synth, queues.queue(spec.kind))["MessageRetentionPeriod"] == spec.retention_days * 86400
    assert _props(synth, queues.dlq(spec.kind))["MessageRetentionPeriod"] == spec.dlq_retention_days * 86400


@pytest.mark.parametrize("spec", QUEUES, ids=lambda s: s.kind)
def test_visibility_timeout_is_at_least_six_times_the_consumer_timeout(synth, spec: QueueSpec):
    queues = synth.stack.queues
    worker_timeout = function_spec(QUEUE_CONSUMER).timeout_seconds
    dlq_timeout = function_spec(DLQ_CONSUMER).timeout_seconds
    assert _props(synth, queues.queue(spec.kind))["VisibilityTimeout"] >= VISIBILITY_FACTOR * worker_timeout
    assert _props(synth, queues.dlq(spec.kind))["VisibilityTimeout"] >= VISIBILITY_FACTOR * dlq_timeout


def test_every_queue_is_encrypted(synth):
    for logical_id, queue in synth.resources("AWS::SQS::Queue").items():
        assert queue["Properties"].get("SqsManagedSseEnabled") is True, logical_id


def test_every_queue_refuses_requests_without_tls(synth):
    # Given every queue / Then a queue policy denies sqs:* when aws:SecureTransport is false
    protected: set[str] = set()
    for policy in synth.resources("AWS::SQS::QueuePolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                protected |= {ref["Ref"] for ref in policy["Properties"]["Queues"]}
    assert protected == set(synth.resources("AWS::SQS::Queue"))
