"""The chunked-job ASL executed by moto's Step Functions interpreter against moto SQS.

Drives the workflow the way a worker would: read the task message from the long queue, answer
its task token, watch the next messages arrive. Polls with a deadline (moto runs executions in a
background thread); no fixed sleeps.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from jobsched.long_jobs.asl import KIND_COMPLETE, KIND_FAILED, KIND_PLAN, KIND_RUN, chunked_job_definition

ROLE = "arn:aws:iam::123456789012:role/jobsched-chunked-job"
INPUT = {"run_id": "run-1", "job_id": "job-1", "tenant": "acme"}


@pytest.fixture
def aws(monkeypatch) -> Iterator[tuple]:
    for key, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sqs = boto3.client("sqs", region_name="us-east-1")
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        # A queue name of its own: a stray execution thread can never write into another test's queue
        url = sqs.create_queue(QueueName=f"long-{uuid.uuid4().hex[:12]}")["QueueUrl"]
        definition = chunked_job_definition(url, max_concurrency=2, heartbeat_seconds=60)
        arn = sfn.create_state_machine(name="chunked", definition=json.dumps(definition), roleArn=ROLE)[
            "stateMachineArn"
        ]
        yield sqs, sfn, url, arn
        _stop_running_executions(sfn)


def _stop_running_executions(sfn) -> None:
    """moto runs executions in daemon threads that outlive the test; stop the ones still waiting."""
    for machine in sfn.list_state_machines()["stateMachines"]:
        running = sfn.list_executions(stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING")
        for execution in running["executions"]:
            sfn.stop_execution(executionArn=execution["executionArn"])


def _next_messages(sqs, url: str, count: int, deadline_seconds: float = 20.0) -> list[dict]:
    """Receive (and delete) at least ``count`` messages, polling until they arrive or the deadline."""
    bodies: list[dict] = []
    deadline = time.monotonic() + deadline_seconds
    while len(bodies) < count and time.monotonic() < deadline:
        for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(bodies) < count:
            time.sleep(0.02)  # poll interval of a real-time interpreter, not a wait for an outcome
    assert len(bodies) >= count, f"expected {count} messages, got {bodies}"
    return bodies


def _final_status(sfn, execution_arn: str, deadline_seconds: float = 20.0) -> dict:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        described = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            return described
        time.sleep(0.02)
    raise AssertionError("execution still running at the deadline")


def test_first_task_message_arrives_on_the_long_queue_with_a_task_token(aws):
    sqs, sfn, url, arn = aws
    # When a chunked run starts (execution name = run id)
    sfn.start_execution(stateMachineArn=arn, name=INPUT["run_id"], input=json.dumps(INPUT))
    # Then the plan task is a message on the long queue carrying a task token and the run (its input
    # names no queue_url: the long queue's is filled in)
    (plan,) = _next_messages(sqs, url, 1)
    assert plan["kind"] == KIND_PLAN
    assert plan["task_token"]
    assert plan["run"] == {**INPUT, "queue_url": url}


def _start_on_a_container_queue(aws, run_id: str) -> tuple[str, dict, str]:
    """Start the execution of a chunked run on the container pool, its input naming a queue of its
    own: (that queue's URL, the input, the execution ARN)."""
    sqs, sfn, _, arn = aws
    container_url = sqs.create_queue(QueueName=f"container-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    run = {**INPUT, "run_id": run_id, "queue_url": container_url}
    execution = sfn.start_execution(stateMachineArn=arn, name=run_id, input=json.dumps(run))["executionArn"]
    return container_url, run, execution


def test_an_input_naming_the_container_queue_sends_every_task_there(aws):
    # Given a chunked run on the container pool: its execution input names the container queue
    sqs, sfn, long_url, _ = aws
    container_url, run, execution = _start_on_a_container_queue(aws, "run-c")
    # When the worker answers the plan with two chunks, each chunk, then the completion
    (plan,) = _next_messages(sqs, container_url, 1)
    assert (plan["kind"], plan["run"]) == (KIND_PLAN, run)
    sfn.send_task_success(taskToken=plan["task_token"], output=json.dumps({"chunks": ["a", "b"]}))
    chunks = _next_messages(sqs, container_url, 2)
    assert sorted((c["kind"], c["index"]) for c in chunks) == [(KIND_RUN, 0), (KIND_RUN, 1)]
    for chunk in chunks:
        sfn.send_task_success(taskToken=chunk["task_token"], output="{}")
    (complete,) = _next_messages(sqs, container_url, 1)
    assert complete["kind"] == KIND_COMPLETE
    sfn.send_task_success(taskToken=complete["task_token"], output=json.dumps({"rows": 2}))
    # Then the execution succeeds and nothing was sent to the long queue
    assert _final_status(sfn, execution)["status"] == "SUCCEEDED"
    assert sqs.receive_message(QueueUrl=long_url, MaxNumberOfMessages=10).get("Messages", []) == []


def test_a_failure_on_the_container_pool_is_recorded_on_the_container_queue(aws):
    # Given a chunked run on the container pool whose only chunk fails for good
    sqs, sfn, long_url, _ = aws
    container_url, _, execution = _start_on_a_container_queue(aws, "run-cf")
    (plan,) = _next_messages(sqs, container_url, 1)
    sfn.send_task_success(taskToken=plan["task_token"], output=json.dumps({"chunks": ["only"]}))
    (chunk,) = _next_messages(sqs, container_url, 1)
    sfn.send_task_failure(taskToken=chunk["task_token"], error="jobsched.PermanentError", cause="bad row")
    # Then the failure notice goes to the container queue too
    (failed,) = _next_messages(sqs, container_url, 1)
    assert (failed["kind"], failed["run_id"]) == (KIND_FAILED, "run-cf")
    assert _final_status(sfn, execution)["status"] == "FAILED"
    assert sqs.receive_message(QueueUrl=long_url, MaxNumberOfMessages=10).get("Messages", []) == []


def test_chunks_then_completion_then_success(aws):
    sqs, sfn, url, arn = aws
    execution = sfn.start_execution(stateMachineArn=arn, name="run-2", input=json.dumps(INPUT))[
        "executionArn"
    ]
    (plan,) = _next_messages(sqs, url, 1)
    sfn.send_task_success(taskToken=plan["task_token"], output=json.dumps({"chunks": ["a", "b", "c"]}))

    # Given three chunks and MaxConcurrency 2 / Then each chunk arrives with its index and the total
    seen = []
    while len(seen) < 3:
        for chunk in _next_messages(sqs, url, 1):
            assert chunk["kind"] == KIND_RUN
            assert chunk["total"] == 3
            seen.append((chunk["index"], chunk["chunk"]))
            sfn.send_task_success(taskToken=chunk["task_token"], output="{}")
    assert sorted(seen) == [(0, "a"), (1, "b"), (2, "c")]

    (complete,) = _next_messages(sqs, url, 1)
    assert complete["kind"] == KIND_COMPLETE
    sfn.send_task_success(taskToken=complete["task_token"], output=json.dumps({"rows": 42}))
    described = _final_status(sfn, execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["result"] == {"rows": 42}


def test_a_permanent_chunk_failure_records_the_failure_and_fails_the_run(aws):
    sqs, sfn, url, arn = aws
    execution = sfn.start_execution(stateMachineArn=arn, name="run-3", input=json.dumps(INPUT))[
        "executionArn"
    ]
    (plan,) = _next_messages(sqs, url, 1)
    sfn.send_task_success(taskToken=plan["task_token"], output=json.dumps({"chunks": ["only"]}))
    (chunk,) = _next_messages(sqs, url, 1)
    # When the worker reports a permanent error (no retry)
    sfn.send_task_failure(taskToken=chunk["task_token"], error="jobsched.PermanentError", cause="bad row")
    # Then the worker is told the run failed, and the execution fails
    (failed,) = _next_messages(sqs, url, 1)
    assert failed["kind"] == KIND_FAILED
    assert failed["run_id"] == INPUT["run_id"]
    assert failed["error"]["Error"] == "jobsched.PermanentError"
    assert _final_status(sfn, execution)["status"] == "FAILED"


def test_a_silent_worker_misses_its_heartbeat_and_the_chunk_is_sent_again(aws):
    sqs, sfn, url, _ = aws
    # Given a workflow whose tasks must heartbeat every second (retried after a second)
    definition = chunked_job_definition(url, heartbeat_seconds=1, retry_interval_seconds=1)
    arn = sfn.create_state_machine(name="fast-heartbeat", definition=json.dumps(definition), roleArn=ROLE)[
        "stateMachineArn"
    ]
    sfn.start_execution(stateMachineArn=arn, name="run-4", input=json.dumps(INPUT))
    (plan,) = _next_messages(sqs, url, 1)
    sfn.send_task_success(taskToken=plan["task_token"], output=json.dumps({"chunks": ["slow"]}))
    (first,) = _next_messages(sqs, url, 1)
    assert first["chunk"] == "slow"
    # When the worker neither heartbeats nor answers
    # Then the task times out and the same chunk is sent again (moto reuses the token; AWS issues a
    # new one per attempt, which is why a worker must answer with the token of the message it holds)
    (second,) = _next_messages(sqs, url, 1)
    assert (second["kind"], second["index"], second["chunk"]) == (KIND_RUN, 0, "slow")
    # And a worker that answers the retry moves the run on to completion
    sfn.send_task_success(taskToken=second["task_token"], output="{}")
    (complete,) = _next_messages(sqs, url, 1)
    assert complete["kind"] == KIND_COMPLETE
