"""What a cold start does before its first AWS call: only the clients and libraries the call needs.

A worker wires S3 (large outputs), Step Functions (chunked jobs) and SNS (dead-letter notifications)
and Powertools' idempotency utility (``ctx.idempotent``), but a run of a plain handler uses none of
them: each is created, or imported, when first used (docs/performance.md, "Lambda asset and cold
start").
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import functions.worker as worker_function
from jobsched.aws.clients import Clients
from jobsched.local.invoke import LambdaContext
from tests.aws.conftest_worker import Kit
from tests.aws.test_worker_function import sqs_event

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def created(monkeypatch) -> list[str]:
    """The services whose boto3 clients get created, in order."""
    services: list[str] = []
    real = Clients.client

    def client(self, service):
        services.append(service)
        return real(self, service)

    monkeypatch.setattr(Clients, "client", client)
    return services


@pytest.fixture
def kit(aws_environ, clock):
    with worker_function.seam.installed(clock=clock):
        yield Kit(aws_environ, clock)


def test_the_worker_creates_only_the_clients_its_runs_call(kit, aws_environ, created):
    # Given a queued run of a plain handler (no large output, not chunked, no notification)
    _, message = kit.new_run(job_id="plain")
    event = sqs_event(aws_environ, [message.to_json()])
    created.clear()  # the test's own sends above
    # When a new container's worker handles it
    response = worker_function.handler(event, LambdaContext("worker", 900))
    # Then the run succeeded, and no S3, Step Functions or SNS client was created for it
    assert response == {"batchItemFailures": []}
    assert set(created) <= {"dynamodb", "sqs"}, created
    assert "dynamodb" in created


def test_a_client_on_first_use_is_the_client_once_used(aws):
    from jobsched.aws.clients import ClientOnFirstUse

    # Given an SQS client handed out but not used yet
    created: list[int] = []
    clients = Clients(region_name="us-east-1")

    def make():
        created.append(1)
        return clients.client("sqs")

    sqs = ClientOnFirstUse("sqs", make)
    assert not sqs.created
    # When eight threads make their first call at once
    threads = [threading.Thread(target=lambda: sqs.list_queues()) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then one client was created, and calls, its exceptions and its meta are the client's own
    assert created == [1]
    assert sqs.created
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="no-such-queue")
    assert sqs.meta.service_model.service_name == "sqs"


_IMPORT_THEN_BUILD = """
import sys
import functions.worker as worker
worker.make_worker(None)
print("idempotency imported:", "aws_lambda_powertools.utilities.idempotency" in sys.modules)
"""


def test_a_cold_worker_does_not_import_the_idempotency_utility(aws_environ):
    # Given a fresh interpreter with the worker's environment
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # When it imports the worker and builds the worker for a first event
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_THEN_BUILD],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Then Powertools' idempotency utility is not loaded: only a handler's ctx.idempotent loads it
    assert result.returncode == 0, result.stderr[-2000:]
    assert "idempotency imported: False" in result.stdout
