"""The worker function handles the records of one batch concurrently (``JOBSCHED_WORKER_CONCURRENCY``)."""

from __future__ import annotations

import threading

import pytest

import functions.worker as worker_function
from jobsched.core.models import RunState
from jobsched.local.invoke import LambdaContext
from jobsched.targets.registry import job, unregister
from tests.aws.conftest_worker import Kit
from tests.aws.test_worker_function import sqs_event

BARRIER_HANDLER = "test.concurrency.barrier"


@pytest.fixture
def kit(aws_environ, clock):
    with worker_function.seam.installed(clock=clock):
        yield Kit(aws_environ, clock)


@pytest.fixture
def barrier():
    """A handler that returns only once three runs are inside it at the same time (else it fails)."""
    meeting = threading.Barrier(3, timeout=5)

    @job(BARRIER_HANDLER)
    def _meet(payload, ctx):
        meeting.wait()  # BrokenBarrierError (a failed attempt) if the others never arrive
        return {"met": True}

    yield meeting
    unregister(BARRIER_HANDLER)


def test_three_records_of_one_batch_run_at_the_same_time(kit, aws_environ, barrier, monkeypatch):
    # Given three runs whose handler needs all three inside it at once, and a concurrency of 3
    monkeypatch.setenv(worker_function.ENV_WORKER_CONCURRENCY, "3")
    pairs = [kit.new_run({"handler": BARRIER_HANDLER}, job_id=f"job{i}") for i in range(3)]
    # When the worker function handles them as one batch
    event = sqs_event(aws_environ, [msg.to_json() for _, msg in pairs])
    response = worker_function.handler(event, LambdaContext("worker", 900))
    # Then every run met the others and succeeded, and no record is left in the queue
    assert response == {"batchItemFailures": []}
    assert [kit.runs.get(run.id).state for run, _ in pairs] == [RunState.SUCCEEDED] * 3


def test_concurrency_of_one_handles_records_one_at_a_time(kit, aws_environ, monkeypatch):
    # Given three runs whose handler notes how many runs are inside it, and a concurrency of 1
    monkeypatch.setenv(worker_function.ENV_WORKER_CONCURRENCY, "1")
    inside: list[int] = []
    active = threading.Semaphore(3)

    def count(payload, ctx):
        with active:
            inside.append(3 - active._value)

    job("test.concurrency.thread")(count)
    try:
        pairs = [kit.new_run({"handler": "test.concurrency.thread"}, job_id=f"job{i}") for i in range(3)]
        # When the worker function handles them as one batch
        event = sqs_event(aws_environ, [msg.to_json() for _, msg in pairs])
        response = worker_function.handler(event, LambdaContext("worker", 900))
    finally:
        unregister("test.concurrency.thread")
    # Then all three ran, each alone
    assert response == {"batchItemFailures": []}
    assert inside == [1, 1, 1]


@pytest.mark.parametrize(("value", "expected"), [("4", 4), ("0", 1), ("lots", 10), (None, 10)])
def test_concurrency_setting_is_read_from_the_environment(monkeypatch, value, expected):
    # Given the variable set to a value (or unset)
    if value is None:
        monkeypatch.delenv(worker_function.ENV_WORKER_CONCURRENCY, raising=False)
    else:
        monkeypatch.setenv(worker_function.ENV_WORKER_CONCURRENCY, value)
    # Then the concurrency is that value, at least 1, or the default
    assert worker_function.concurrency() == expected
