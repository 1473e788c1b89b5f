"""A DAG-workflow pipeline over moto: job service, worker (as the worker function wires it), sweeper
and the API's workflow service, and a drain loop that delivers every queued message.

Imported explicitly by the workflow tests (``from tests.aws.workflow_kit import ...``).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import jobsched.targets.demo  # noqa: F401  (registers demo.*)
from jobsched.aws.attempts import AttemptStore
from jobsched.aws.metering import Meter, dynamo_for
from jobsched.aws.outputs import OutputStore
from jobsched.compose.pipeline import (
    sweeper_from_settings,
    worker_from_settings,
    workflow_engine_from_settings,
)
from jobsched.core.errors import PermanentError
from jobsched.services.deliveries import Delivery
from jobsched.services.jobs import JobService
from jobsched.services.outcome import Outcome
from jobsched.services.runs import RunService
from jobsched.services.worker import process_batch
from jobsched.services.workflow_service import WorkflowService
from jobsched.targets.registry import RegistryCatalog, is_registered, job
from tests.aws.conftest import build_pipeline

#: Every execution of a ``wf.*`` test handler, by run id (a node run twice would count 2).
EXECUTIONS: Counter[str] = Counter()
_LOCK = threading.Lock()


def _count(ctx: Any) -> None:
    with _LOCK:
        EXECUTIONS[ctx.run_id] += 1


def _register() -> None:
    if is_registered("wf.echo"):
        return

    @job("wf.echo")
    def _echo(payload: dict, ctx: Any) -> Any:
        _count(ctx)
        return {"node_payload": payload, "value": payload.get("value")}

    @job("wf.fail")
    def _fail(payload: dict, ctx: Any) -> None:
        _count(ctx)
        raise PermanentError(str(payload.get("message", "wf.fail failed on purpose")))

    @job("wf.flaky")
    def _flaky(payload: dict, ctx: Any) -> dict:
        """Fails (permanently) on its first ``failures`` executions *per run*, then succeeds."""
        _count(ctx)
        if EXECUTIONS[ctx.run_id] <= int(payload.get("failures", 1)):
            raise PermanentError(f"wf.flaky: execution {EXECUTIONS[ctx.run_id]} fails on purpose")
        return {"attempt": ctx.attempt}

    @job("wf.wait")
    def _wait(payload: dict, ctx: Any) -> dict:
        """Waits until cancelled or ``seconds`` pass."""
        _count(ctx)
        cancelled = ctx.cancel_event.wait(float(payload.get("seconds", 5)))
        return {"cancelled": cancelled}


_register()

NO_BACKOFF = {"max_attempts": 1, "base_seconds": 0, "max_seconds": 0}


def node(node_id: str, handler: str = "wf.echo", *deps: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": node_id,
        "target": {"handler": handler},
        "depends_on": list(deps),
        "retry": NO_BACKOFF,
        **extra,
    }


def definition(nodes: list[dict], **extra: Any) -> dict[str, Any]:
    return {"name": "wf", "schedule": "0 3 * * *", "nodes": nodes, **extra}


class WorkflowKit:
    """Everything a workflow test drives, over one moto environment and one fake clock."""

    def __init__(self, aws: Any, clock: Any):
        self.aws = aws
        self.clock = clock
        self.meter = Meter()
        pipeline = build_pipeline(aws)
        self.jobs = JobService(
            pipeline.dispatcher.jobs,
            pipeline.dispatcher.runs,
            pipeline.dispatcher,
            catalog=RegistryCatalog(),
        )
        self.dynamo = dynamo_for(aws.settings, aws.clients.dynamodb, self.meter)
        self.deliveries = worker_from_settings(aws.settings, aws.clients, clock, "worker-a", meter=self.meter)
        self.worker = self.deliveries.worker
        self.runs_service = RunService(
            runs=pipeline.dispatcher.runs,
            attempts=AttemptStore(pipeline.dispatcher.runs.dynamo, aws.settings.runs_table),
            jobs=pipeline.dispatcher.jobs,
            outputs=OutputStore(aws.clients.s3, aws.settings.bucket),
            queues=pipeline.dispatcher.queues,
        )
        self.engine = workflow_engine_from_settings(
            aws.settings, aws.clients, pipeline.dispatcher.runs.dynamo, replay=self.runs_service.replay
        )
        self.service = WorkflowService(self.jobs, self.engine)
        self.sweeper = sweeper_from_settings(aws.settings, aws.clients, meter=self.meter)
        self.delivered = 0
        EXECUTIONS.clear()

    def create(self, nodes: list[dict], tenant: str = "acme", **extra: Any):
        return self.service.create(tenant, definition(nodes, **extra), self.clock.now())

    def trigger(self, workflow_id: str, tenant: str = "acme", payload: dict | None = None):
        return self.service.trigger(tenant, workflow_id, self.clock.now(), payload=payload)

    def receive(self, max_messages: int = 10) -> list[Delivery]:
        out: list[Delivery] = []
        for url in self.aws.settings.queue_urls.values():
            got = self.aws.clients.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=max_messages, VisibilityTimeout=60
            ).get("Messages", [])
            out += [Delivery(m["MessageId"], m["Body"], m["ReceiptHandle"], url) for m in got]
        return out

    def handle(self, delivery: Delivery) -> Outcome:
        outcome = self.deliveries.handle(delivery, self.clock.now())
        if not outcome.defer:
            self.aws.clients.sqs.delete_message(
                QueueUrl=delivery.queue_url, ReceiptHandle=delivery.receipt_handle
            )
        self.delivered += 1
        return outcome

    def drain(
        self, *, concurrency: int = 1, until: Callable[[], bool] | None = None, rounds: int = 200
    ) -> int:
        """Deliver messages (a batch per queue at a time, ``concurrency`` records at once) until the
        queues are empty (or ``until()``); returns the deliveries handled."""
        handled = 0
        for _ in range(rounds):
            if until is not None and until():
                return handled
            batch = self.receive()
            if not batch:
                return handled
            process_batch(batch, self.handle, concurrency=concurrency)
            handled += len(batch)
        raise AssertionError("the queues did not drain")

    def view(self, run_id: str, tenant: str = "acme"):
        return self.service.run(tenant, run_id)

    def states(self, run_id: str) -> dict[str, str]:
        return {k: str(v) for k, v in self.view(run_id).states().items()}

    def node_payload_of(self, run_id: str, node_id: str) -> dict:
        view = self.view(run_id)
        output = view.nodes[node_id].output
        return json.loads(json.dumps(output))["node_payload"]
