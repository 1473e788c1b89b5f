"""The Step Functions definition (Amazon States Language, JSONPath) of a chunked job.

One function, :func:`chunked_job_definition`, builds it. The CDK stack passes the long queue's URL
as a ``DefinitionSubstitutions`` key (``${...}``, filled in by CloudFormation with the queue's URL,
a token at synthesis); the embedded mode passes the moto queue URL itself. Both get the same workflow::

    Queue ──(no queue_url)──> LongQueue ──┐
      └─────(queue_url)───────────────────┴──> Plan ──> Chunks (Map) ──> Complete ──> (end)
                                                 │        │ each: RunChunk  │
                                                 └────────┴──── Catch ──────┴──> RecordFailure ──> Failed

Every task is a message on the run's chunk queue, sent with
``arn:aws:states:::sqs:sendMessage.waitForTaskToken``: a worker receives it, does the work, sends
``SendTaskHeartbeat`` at least every ``heartbeat_seconds`` and ends it with ``SendTaskSuccess`` or
``SendTaskFailure``. The chunk queue is the execution input's ``queue_url``, set by whoever starts
the execution from the run's pool (:func:`jobsched.core.pools.chunk_queue_for`: the ``container``
queue on the container pool, else the ``long`` queue); an input without one (an execution started by
code from before pools) gets the ``long`` queue's URL, the one the definition was built with. Why a
queue and not a Lambda task: the chunk runs on the same worker pools, under the ``long`` queue's own
function's capacity or the container pool's, with the same leases and checkpoints as any run.

Execution input (execution name = run id, so a start is never duplicated)::

    {"run_id": str, "job_id": str, "tenant": str, "queue_url": str, ...anything else the planner needs}

Messages on the chunk queue (JSON; ``kind`` tells the worker what to do):

* ``chunk.plan``     ``{"v", "kind", "task_token", "execution_id", "run": <execution input>}``;
  the worker answers ``SendTaskSuccess(output={"chunks": [<chunk>, ...]})`` (keep chunks small:
  descriptors such as ranges or S3 keys, the whole state must stay under 256 KB).
* ``chunk.run``      ``{"v", "kind", "task_token", "execution_id", "run_id", "job_id", "tenant",
  "index", "total", "chunk"}``; the worker checkpoints progress in DynamoDB so a retried chunk resumes.
  Chunk outputs are not collected in the state (size limit); the worker stores them.
* ``chunk.complete`` ``{"v", "kind", "task_token", "execution_id", "run": <execution input>}``;
  runs once, after every chunk succeeded; its output becomes the execution's ``result``.
* ``chunk.failed``   ``{"v", "kind", "execution_id", "run_id", "job_id", "tenant", "error"}`` with no
  task token: a notification so the worker records the run as failed (``error`` holds ``Error`` and
  ``Cause`` from Step Functions).

A worker that reports ``SendTaskFailure(error="jobsched.PermanentError")`` stops the retries of that
task at once; ``jobsched.RetryableError`` (what the worker reports for any other failure), a timeout
or a missed heartbeat is retried with exponential backoff.
Every message carries ``MessageGroupId = tenant`` (SQS fair queues), like every other run message.
"""

from __future__ import annotations

from typing import Any

DEFAULT_MAX_CONCURRENCY = 10
DEFAULT_HEARTBEAT_SECONDS = 120
DEFAULT_TASK_TIMEOUT_SECONDS = 6 * 3600
DEFAULT_MAX_ATTEMPTS = 3

MESSAGE_VERSION = 1
KIND_PLAN = "chunk.plan"
KIND_RUN = "chunk.run"
KIND_COMPLETE = "chunk.complete"
KIND_FAILED = "chunk.failed"
MESSAGE_KINDS = (KIND_PLAN, KIND_RUN, KIND_COMPLETE, KIND_FAILED)

PERMANENT_ERROR = "jobsched.PermanentError"
#: What a worker reports for a failure worth retrying (listed explicitly: ``States.TaskFailed``
#: matches any task error on AWS, but the rule should not depend on that wildcard).
RETRYABLE_ERROR = "jobsched.RetryableError"
FAILED_ERROR = "jobsched.ChunkedJobFailed"

SEND_WAIT = "arn:aws:states:::sqs:sendMessage.waitForTaskToken"
SEND = "arn:aws:states:::sqs:sendMessage"
#: The partition in the service-integration ARNs above: ``aws-cn`` and ``aws-us-gov`` regions name their
#: own (``arn:aws-cn:states:::sqs:sendMessage``), so the stack passes a substitution placeholder.
DEFAULT_PARTITION = "aws"


def integration_arn(resource: str, partition: str = DEFAULT_PARTITION) -> str:
    """``resource`` (:data:`SEND_WAIT` or :data:`SEND`) in ``partition`` (or a placeholder for it)."""
    return resource.replace("arn:aws:", f"arn:{partition}:", 1)


# State names: the embedded mode, tests and the docs refer to them.
QUEUE = "Queue"
LONG_QUEUE = "LongQueue"
PLAN = "Plan"
CHUNKS = "Chunks"
RUN_CHUNK = "RunChunk"
COMPLETE = "Complete"
RECORD_FAILURE = "RecordFailure"
FAILED = "Failed"


#: State transitions (what Step Functions bills a standard workflow: one per state entered, a retry of
#: a task one more) that each workflow message stands for: its task's state entered once more (a
#: retried task sends a new message); ``chunk.failed`` is ``RecordFailure`` then ``Failed``.
TRANSITIONS_BY_KIND = {KIND_PLAN: 1, KIND_RUN: 1, KIND_COMPLETE: 1, KIND_FAILED: 2}
#: The ``Chunks`` map state, entered once a plan is answered.
PLANNED_TRANSITIONS = 1


def start_transitions(has_queue_url: bool) -> int:
    """Transitions before the first task: ``Queue`` (a choice), and ``LongQueue`` when the input names
    no chunk queue. (The ``Plan`` task's own is its ``chunk.plan`` message's.)"""
    return 1 if has_queue_url else 2


def _retry(max_attempts: int, interval_seconds: int) -> list[dict[str, Any]]:
    """A permanent failure is not retried; timeouts, missed heartbeats and other failures are."""
    return [
        {"ErrorEquals": [PERMANENT_ERROR], "MaxAttempts": 0},
        {
            "ErrorEquals": [
                RETRYABLE_ERROR,
                "States.Timeout",
                "States.HeartbeatTimeout",
                "States.TaskFailed",
            ],
            "IntervalSeconds": interval_seconds,
            "MaxAttempts": max_attempts,
            "BackoffRate": 2.0,
            "MaxDelaySeconds": 300,
            "JitterStrategy": "FULL",
        },
    ]


_CATCH = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": RECORD_FAILURE}]


#: Where in the state (JSONPath) the tasks read the chunk queue's URL: the execution input's.
QUEUE_URL_PATH = "$.queue_url"


def _callback_task(
    body: dict[str, Any],
    *,
    heartbeat_seconds: int,
    timeout_seconds: int,
    max_attempts: int,
    interval_seconds: int,
    partition: str,
) -> dict[str, Any]:
    """A task that sends ``body`` to the run's chunk queue with a task token and waits for the
    worker's answer."""
    return {
        "Type": "Task",
        "Resource": integration_arn(SEND_WAIT, partition),
        "Parameters": {
            "QueueUrl.$": QUEUE_URL_PATH,
            "MessageGroupId.$": "$.tenant",
            "MessageBody": {
                "v": MESSAGE_VERSION,
                "task_token.$": "$$.Task.Token",
                "execution_id.$": "$$.Execution.Id",
                **body,
            },
        },
        "HeartbeatSeconds": heartbeat_seconds,
        "TimeoutSeconds": timeout_seconds,
        "Retry": _retry(max_attempts, interval_seconds),
    }


def chunked_job_definition(
    long_queue_url: str,
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS,
    task_timeout_seconds: int = DEFAULT_TASK_TIMEOUT_SECONDS,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    retry_interval_seconds: int = 10,
    partition: str = DEFAULT_PARTITION,
) -> dict[str, Any]:
    """Return the ASL (a JSON-serialisable dict) of the chunked-job state machine.

    ``long_queue_url`` is the URL of the ``long`` queue, or a placeholder such as
    ``"${LongQueueUrl}"`` that CDK's ``definition_substitutions`` replaces with the real URL: the
    chunk queue of an execution whose input names no ``queue_url``;
    ``partition`` likewise names the partition of the SQS integrations' ARNs (``aws``, ``aws-cn``,
    ``aws-us-gov``, or a placeholder such as ``"${Partition}"``).
    ``max_concurrency`` bounds the chunks in flight per run (0 would mean unbounded, so it must be
    at least 1); ``heartbeat_seconds`` is how long a worker may stay silent before the task times out.
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if not 1 <= heartbeat_seconds < task_timeout_seconds:
        raise ValueError(
            f"heartbeat_seconds must be between 1 and task_timeout_seconds ({task_timeout_seconds}), "
            f"got {heartbeat_seconds}"
        )
    if max_attempts < 0:
        raise ValueError(f"max_attempts must be 0 or more, got {max_attempts}")
    task: dict[str, Any] = {
        "heartbeat_seconds": heartbeat_seconds,
        "timeout_seconds": task_timeout_seconds,
        "max_attempts": max_attempts,
        "interval_seconds": retry_interval_seconds,
        "partition": partition,
    }
    queue = {
        "Type": "Choice",
        "Choices": [{"Variable": QUEUE_URL_PATH, "IsPresent": True, "Next": PLAN}],
        "Default": LONG_QUEUE,
    }
    long_queue = {"Type": "Pass", "Result": long_queue_url, "ResultPath": QUEUE_URL_PATH, "Next": PLAN}
    plan = _callback_task({"kind": KIND_PLAN, "run.$": "$"}, **task)
    plan.update({"ResultSelector": {"chunks.$": "$.chunks"}, "ResultPath": "$.plan", "Next": CHUNKS})
    plan["Catch"] = _CATCH

    run_chunk = _callback_task(
        {
            "kind": KIND_RUN,
            "run_id.$": "$.run_id",
            "job_id.$": "$.job_id",
            "tenant.$": "$.tenant",
            "index.$": "$.index",
            "total.$": "$.total",
            "chunk.$": "$.chunk",
        },
        **task,
    )
    run_chunk["End"] = True

    chunks = {
        "Type": "Map",
        "ItemsPath": "$.plan.chunks",
        "MaxConcurrency": max_concurrency,
        "ItemSelector": {
            "queue_url.$": QUEUE_URL_PATH,
            "run_id.$": "$.run_id",
            "job_id.$": "$.job_id",
            "tenant.$": "$.tenant",
            "index.$": "$$.Map.Item.Index",
            "total.$": "States.ArrayLength($.plan.chunks)",
            "chunk.$": "$$.Map.Item.Value",
        },
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": RUN_CHUNK,
            "States": {RUN_CHUNK: run_chunk},
        },
        "ResultPath": None,
        "Catch": _CATCH,
        "Next": COMPLETE,
    }

    # The completion message carries the execution input with the plan; its answer is the result.
    complete = _callback_task({"kind": KIND_COMPLETE, "run.$": "$"}, **task)
    complete.update({"ResultPath": "$.result", "Catch": _CATCH, "End": True})

    record_failure = {
        "Type": "Task",
        "Resource": integration_arn(SEND, partition),
        "Parameters": {
            "QueueUrl.$": QUEUE_URL_PATH,
            "MessageGroupId.$": "$.tenant",
            "MessageBody": {
                "v": MESSAGE_VERSION,
                "kind": KIND_FAILED,
                "execution_id.$": "$$.Execution.Id",
                "run_id.$": "$.run_id",
                "job_id.$": "$.job_id",
                "tenant.$": "$.tenant",
                "error.$": "$.error",
            },
        },
        "ResultPath": None,
        "Retry": [
            {
                "ErrorEquals": ["States.ALL"],
                "IntervalSeconds": 2,
                "MaxAttempts": 5,
                "BackoffRate": 2.0,
            }
        ],
        "Next": FAILED,
    }

    return {
        "Comment": "jobsched chunked job: Plan -> Map(chunks) -> Complete, each task on the run's chunk "
        "queue (the input's queue_url, else the long queue)",
        "QueryLanguage": "JSONPath",
        "StartAt": QUEUE,
        "States": {
            QUEUE: queue,
            LONG_QUEUE: long_queue,
            PLAN: plan,
            CHUNKS: chunks,
            COMPLETE: complete,
            RECORD_FAILURE: record_failure,
            FAILED: {
                "Type": "Fail",
                "Error": FAILED_ERROR,
                "Cause": "a plan, chunk or completion task failed for good; see the RecordFailure input",
            },
        },
    }
