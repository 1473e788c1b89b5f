"""The chunked-job state machine in the stack: standard, logged (ALL), traced, bound to the long queue."""

from __future__ import annotations

import json

from jobsched.long_jobs.asl import CHUNKS, COMPLETE, LONG_QUEUE, PLAN, QUEUE, RUN_CHUNK


def _state_machine(synth) -> dict:
    return synth.template["Resources"][synth.logical_id(synth.stack.long_jobs.state_machine)]["Properties"]


def test_state_machine_is_standard_with_logging_all_and_tracing(synth):
    props = _state_machine(synth)
    assert props["StateMachineType"] == "STANDARD"
    assert props["LoggingConfiguration"]["Level"] == "ALL"
    assert props["LoggingConfiguration"]["IncludeExecutionData"] is True
    assert props["TracingConfiguration"] == {"Enabled": True}


def test_definition_is_the_shared_asl_with_the_real_long_queue_url(synth):
    # Given the definition produced by jobsched.long_jobs.asl with placeholders / Then CloudFormation
    # substitutes the long queue's URL (a Ref to the queue) and the stack's partition (in the SQS
    # integrations' ARNs), and the states are the shared ones
    props = _state_machine(synth)
    long_queue = synth.logical_id(synth.stack.queues.queue("long"))
    assert props["DefinitionSubstitutions"] == {
        "LongQueueUrl": {"Ref": long_queue},
        "Partition": {"Ref": "AWS::Partition"},
    }
    definition = json.loads(props["DefinitionString"])
    assert definition["StartAt"] == QUEUE
    assert (
        definition["States"][PLAN]["Resource"] == "arn:${Partition}:states:::sqs:sendMessage.waitForTaskToken"
    )
    # The long queue is the chunk queue of an execution whose input names none; tasks send to the input's
    assert definition["States"][LONG_QUEUE]["Result"] == "${LongQueueUrl}"
    assert definition["States"][PLAN]["Parameters"]["QueueUrl.$"] == "$.queue_url"
    item = definition["States"][CHUNKS]["ItemProcessor"]["States"][RUN_CHUNK]
    assert item["Parameters"]["QueueUrl.$"] == "$.queue_url"
    assert definition["States"][CHUNKS]["MaxConcurrency"] == synth.stack.config.long_job_max_concurrency
    assert item["HeartbeatSeconds"] == synth.stack.config.long_job_heartbeat_seconds
    assert definition["States"][COMPLETE]["End"] is True


def test_state_machine_role_may_send_to_the_chunk_queues_only(synth):
    # Given the stack / Then the role sends to the long queue and to the container queue (chunked jobs
    # on the container pool), nothing else
    role = {"Ref": synth.logical_id(synth.stack.long_jobs.state_machine.role)}
    sends = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if role in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = (
                    statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                )
                if "sqs:SendMessage" in actions:
                    sends.append(statement["Resource"])
    assert sends == [
        {"Fn::GetAtt": [synth.logical_id(synth.stack.queues.queue(kind)), "Arn"]}
        for kind in ("long", "container")
    ]
