"""The chunked-job ASL from jobsched.long_jobs.asl: shape, limits and arguments (pure, no AWS)."""

from __future__ import annotations

import json

import pytest

from jobsched.long_jobs.asl import (
    CHUNKS,
    COMPLETE,
    FAILED,
    KIND_COMPLETE,
    KIND_FAILED,
    KIND_PLAN,
    KIND_RUN,
    LONG_QUEUE,
    PERMANENT_ERROR,
    PLAN,
    QUEUE,
    RECORD_FAILURE,
    RUN_CHUNK,
    SEND,
    SEND_WAIT,
    chunked_job_definition,
)

URL = "https://sqs.us-east-1.amazonaws.com/123456789012/long"


@pytest.fixture
def definition() -> dict:
    return json.loads(json.dumps(chunked_job_definition(URL, max_concurrency=7, heartbeat_seconds=45)))


def test_definition_is_json_with_plan_map_complete_and_a_failure_path(definition):
    # The chunk queue is chosen first (Queue, LongQueue), then Plan as before
    assert definition["StartAt"] == QUEUE
    assert definition["States"][QUEUE]["Choices"][0]["Next"] == PLAN
    assert definition["States"][LONG_QUEUE]["Next"] == PLAN
    assert set(definition["States"]) == {QUEUE, LONG_QUEUE, PLAN, CHUNKS, COMPLETE, RECORD_FAILURE, FAILED}
    assert definition["States"][PLAN]["Next"] == CHUNKS
    assert definition["States"][CHUNKS]["Next"] == COMPLETE
    assert definition["States"][COMPLETE]["End"] is True
    assert definition["States"][RECORD_FAILURE]["Next"] == FAILED
    assert definition["States"][FAILED]["Type"] == "Fail"


def test_definition_uses_jsonpath(definition):
    assert definition["QueryLanguage"] == "JSONPath"


def test_every_task_waits_for_a_token_from_the_chunk_queue_with_a_heartbeat(definition):
    # Given the definition / Then every task sends to the execution's queue_url (the run's pool's
    # chunk queue), which is the long queue when the input names none
    states = definition["States"]
    assert states[QUEUE]["Choices"] == [{"Variable": "$.queue_url", "IsPresent": True, "Next": PLAN}]
    assert states[QUEUE]["Default"] == LONG_QUEUE
    assert states[LONG_QUEUE] == {"Type": "Pass", "Result": URL, "ResultPath": "$.queue_url", "Next": PLAN}
    assert states[CHUNKS]["ItemSelector"]["queue_url.$"] == "$.queue_url"
    assert states[RECORD_FAILURE]["Parameters"]["QueueUrl.$"] == "$.queue_url"
    tasks = [states[PLAN], states[CHUNKS]["ItemProcessor"]["States"][RUN_CHUNK], states[COMPLETE]]
    for task, kind in zip(tasks, (KIND_PLAN, KIND_RUN, KIND_COMPLETE), strict=True):
        assert task["Resource"] == SEND_WAIT
        assert task["Parameters"]["QueueUrl.$"] == "$.queue_url"
        assert task["Parameters"]["MessageBody"]["task_token.$"] == "$$.Task.Token"
        assert task["Parameters"]["MessageBody"]["kind"] == kind
        assert task["HeartbeatSeconds"] == 45
        assert task["TimeoutSeconds"] > task["HeartbeatSeconds"]


def test_map_runs_chunks_with_bounded_concurrency(definition):
    chunks = definition["States"][CHUNKS]
    assert chunks["Type"] == "Map"
    assert chunks["MaxConcurrency"] == 7
    assert chunks["ItemsPath"] == "$.plan.chunks"
    assert chunks["ItemSelector"]["index.$"] == "$$.Map.Item.Index"


def test_tasks_retry_timeouts_and_failures_with_backoff_but_not_permanent_errors(definition):
    retry = definition["States"][CHUNKS]["ItemProcessor"]["States"][RUN_CHUNK]["Retry"]
    assert retry[0] == {"ErrorEquals": [PERMANENT_ERROR], "MaxAttempts": 0}
    assert {"States.Timeout", "States.TaskFailed"} <= set(retry[1]["ErrorEquals"])
    assert retry[1]["BackoffRate"] > 1


@pytest.mark.parametrize("state", [PLAN, CHUNKS, COMPLETE])
def test_each_step_catches_into_the_failure_recording_step(definition, state):
    (catch,) = definition["States"][state]["Catch"]
    assert catch == {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": RECORD_FAILURE}


def test_failure_step_notifies_the_worker_without_waiting(definition):
    record = definition["States"][RECORD_FAILURE]
    assert record["Resource"] == SEND
    assert record["Parameters"]["MessageBody"]["kind"] == KIND_FAILED
    assert record["Parameters"]["MessageBody"]["error.$"] == "$.error"


def test_messages_are_grouped_by_tenant_for_fair_queues(definition):
    assert definition["States"][PLAN]["Parameters"]["MessageGroupId.$"] == "$.tenant"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"heartbeat_seconds": 0}, "heartbeat_seconds"),
        ({"heartbeat_seconds": 100, "task_timeout_seconds": 100}, "heartbeat_seconds"),
        ({"max_attempts": -1}, "max_attempts"),
    ],
)
def test_out_of_range_arguments_are_rejected_with_their_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        chunked_job_definition(URL, **kwargs)
