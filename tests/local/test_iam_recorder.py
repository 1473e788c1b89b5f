"""The call recorder: calls made in an invocation are attributed to its function, also from threads
that copy the context; a call whose context was lost during an invocation is recorded as a failure;
calls outside invocations are not counted; nothing is hooked unless the recorder is installed."""

from __future__ import annotations

import contextvars
import os
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from moto import mock_aws

from jobsched.local.iam import recorder

TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/<JOBSCHED_RUNS_TABLE>"


@pytest.fixture
def sqs_and_table(monkeypatch: pytest.MonkeyPatch):
    # A table of its own per test: under a mock another fixture keeps active, moto's state outlives
    # this test's ``mock_aws``.
    name = f"runs-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("JOBSCHED_RUNS_TABLE", name)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield dynamodb


def _get(dynamodb) -> None:
    dynamodb.get_item(TableName=os.environ["JOBSCHED_RUNS_TABLE"], Key={"pk": {"S": "x"}})


def test_calls_in_an_invocation_are_attributed_and_others_not_counted(sqs_and_table) -> None:
    # Given a recording, When one call is made in the worker's invocation and one outside any,
    with recorder.capturing() as recording:
        _get(sqs_and_table)
        with recorder.invocation("worker"):
            _get(sqs_and_table)
    # Then only the invocation's call is counted, as the action on the symbolic table ARN.
    assert recording.calls == 1
    assert recording.triples == {("worker", "dynamodb:GetItem", TABLE_ARN): 1}
    assert not recording.unattributed


def test_a_thread_that_copies_the_context_keeps_the_attribution(sqs_and_table) -> None:
    with recorder.capturing() as recording, recorder.invocation("dispatcher"):
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(_get, sqs_and_table))
        thread.start()
        thread.join()
        with ThreadPoolExecutor(2) as pool:
            pool.submit(contextvars.copy_context().run, _get, sqs_and_table).result()
    assert recording.triples == {("dispatcher", "dynamodb:GetItem", TABLE_ARN): 2}
    assert not recording.unattributed


def test_a_thread_started_without_the_context_is_an_unattributed_call(sqs_and_table) -> None:
    # Given an invocation that starts a thread in an empty context (as the worker's record threads did),
    with recorder.capturing() as recording, recorder.invocation("worker"):
        thread = threading.Thread(target=contextvars.Context().run, args=(_get, sqs_and_table))
        thread.start()
        thread.join()
    # Then the call is not attributed to anyone, and is recorded as a failure naming the invocation.
    assert recording.calls == 0
    assert recording.unattributed == {"worker: dynamodb:GetItem": 1}


def test_a_pool_task_submitted_without_the_context_is_an_unattributed_call(sqs_and_table) -> None:
    with recorder.capturing() as recording, recorder.invocation("api"), ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: _get(sqs_and_table), range(2)))
    assert recording.unattributed == {"api: dynamodb:GetItem": 2}


def test_a_worker_batch_from_the_high_queue_is_the_high_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the high queue's URL in the environment, Then a batch of its records is WorkerHigh's.
    monkeypatch.setenv("JOBSCHED_QUEUE_URL_HIGH", "http://127.0.0.1:1/123456789012/p-high")
    high = {"Records": [{"eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:p-high"}]}
    default = {"Records": [{"eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:p-default"}]}
    assert recorder.function_of_event("worker", high) == "worker_high"
    assert recorder.function_of_event("worker", default) == "worker"
    assert recorder.function_of_event("sweeper", high) == "sweeper"


def test_a_worker_batch_from_the_long_queue_is_the_long_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given the long queue's URL in the environment, Then a batch of its records is WorkerLong's.
    monkeypatch.setenv("JOBSCHED_QUEUE_URL_HIGH", "http://127.0.0.1:1/123456789012/p-high")
    monkeypatch.setenv("JOBSCHED_QUEUE_URL_LONG", "http://127.0.0.1:1/123456789012/p-long")
    long = {"Records": [{"eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:p-long"}]}
    mixed = {"Records": [*long["Records"], {"eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:p-high"}]}
    assert recorder.function_of_event("worker", long) == "worker_long"
    assert recorder.function_of_event("worker", mixed) == "worker"


def test_recordings_round_trip_through_files(tmp_path) -> None:
    recording = recorder.Recording()
    recording.add("sweeper", "sqs:SendMessage", [("sqs:SendMessage", "arn:q")])
    recording.add_unattributed("worker: s3:GetObject")
    recorder.write(recording, tmp_path)
    loaded = recorder.Recording.load_dir(tmp_path)
    assert loaded.to_json() == recording.to_json()


def test_nothing_is_hooked_unless_installed_and_the_functions_never_import_the_recorder() -> None:
    # Given a fresh interpreter that imports every function as Lambda does (no recorder asked for),
    code = (
        "import sys, botocore.client as c; original = c.BaseClient._make_api_call\n"
        "import functions.api, functions.dispatcher, functions.worker\n"
        "import functions.sweeper, functions.dlq_consumer\n"
        "assert c.BaseClient._make_api_call is original\n"
        "assert not [m for m in sys.modules if m.startswith('jobsched.local')], 'recorder imported'\n"
        "from jobsched.local.iam import recorder\n"
        "recorder.install(); assert c.BaseClient._make_api_call is not original\n"
        "assert getattr(functions.worker.handler, '__iam_wrapped__', False)\n"
        "recorder.uninstall(); assert c.BaseClient._make_api_call is original\n"
        "assert not getattr(functions.worker.handler, '__iam_wrapped__', False)\n"
    )
    # Then botocore is untouched and jobsched.local is never imported; install and uninstall are exact.
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_cancel_boards_batched_reads_belong_to_the_invocation_that_made_it(sqs_and_table) -> None:
    # Given a worker invocation whose cancel board reads the flags of its runs from its own thread
    # (found by this recorder: that thread ran in an empty context, its reads unattributed),
    from jobsched.targets.executor import CancelBoard

    def read_flags(run_ids: list[str]) -> set[str]:
        _get(sqs_and_table)
        return set()

    with recorder.capturing() as recording, recorder.invocation("worker"):
        board = CancelBoard(read_flags, 0.01)
        stop = threading.Event()
        with board.watch("run-1", stop, lambda: None):
            deadline = time.monotonic() + 10
            while not recording.calls and time.monotonic() < deadline:
                time.sleep(0.01)
        stop.set()
    # Then its reads are the worker's
    assert recording.triples[("worker", "dynamodb:GetItem", TABLE_ARN)] >= 1
    assert not recording.unattributed


def test_the_container_worker_loops_calls_are_attributed_to_container_worker(sqs_and_table) -> None:
    # Given the container worker's receive, made by the loop outside any Lambda invocation
    from types import SimpleNamespace

    from jobsched.aws.queues import QueueConsumer
    from jobsched.compose import container_worker

    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName=f"container-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    loop = SimpleNamespace(consumer=QueueConsumer(sqs, url), config=SimpleNamespace(wait_seconds=0))
    # When it receives through the loop's function
    with recorder.capturing() as recording:
        container_worker.receive_messages(loop, 1)  # type: ignore[arg-type]
    # Then the call is the container_worker's, as the task role will be judged
    assert [(f, op) for f, op in recording.operations] == [("container_worker", "sqs:ReceiveMessage")]
    assert not recording.unattributed
