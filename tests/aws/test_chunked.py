"""Chunked jobs end to end in-process: the worker starts the execution, moto's Step Functions
interpreter runs the ASL against moto SQS, and the test drains the long queue through the worker.

moto runs executions in background threads on the wall clock, so the drain polls with a deadline
(no fixed sleeps); the worker's own clock is fake and fixed.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from moto import mock_aws

from jobsched.aws.clients import Clients
from jobsched.aws.step_functions import StepFunctions
from jobsched.core.errors import PermanentError, RetryableError
from jobsched.core.models import RunState
from jobsched.long_jobs.asl import KIND_RUN, chunked_job_definition
from jobsched.long_jobs.checkpoints import ChunkStore
from jobsched.long_jobs.chunk_runner import ChunkRunner
from jobsched.long_jobs.chunked import chunked_job, execution_name
from jobsched.long_jobs.parent import PARENT_LEASE_SECONDS, sfn_owner
from jobsched.runtime.observability import (
    CHUNKED_RUNS_STARTED,
    RUNS_CANCELLED,
    RUNS_DEAD_LETTERED,
    RUNS_SUCCEEDED,
)
from jobsched.services.deliveries import Deliveries, Delivery
from jobsched.services.worker import Worker, WorkerConfig
from jobsched.targets.registry import unregister
from tests.aws.conftest import REGION, AwsEnv, _fake_credentials, provision
from tests.aws.conftest_worker import Kit

ROLE = "arn:aws:iam::123456789012:role/jobsched-chunked-job"
DEADLINE_SECONDS = 30.0

# --- test handlers: what they saw is recorded per test in CALLS -------------------------------------

CALLS: list[tuple[str, Any]] = []
FAIL_ONCE: set[tuple[int, int]] = set()  # (chunk index, item) that raise a retryable error once


class Sum:
    def plan(self, payload: dict, ctx: Any) -> list:
        CALLS.append(("plan", payload))
        n = payload["chunks"]
        return [{"items": list(range(i * 3, i * 3 + 3))} for i in range(n)]

    def run_chunk(self, chunk: dict, ctx: Any) -> dict:
        state = ctx.checkpoint or {"next": 0, "sum": 0}
        CALLS.append(("chunk", (ctx.index, state["next"])))
        for position in range(state["next"], len(chunk["items"])):
            if (ctx.index, position) in FAIL_ONCE:
                FAIL_ONCE.discard((ctx.index, position))
                raise RetryableError(f"flaky item {position}")
            state = {"next": position + 1, "sum": state["sum"] + chunk["items"][position]}
            ctx.save_checkpoint(state)
        return {"sum": state["sum"]}

    def complete(self, payload: dict, ctx: Any, summary: dict) -> dict:
        CALLS.append(("complete", summary))
        return {"total": sum(o["sum"] for o in summary["outputs"]), "chunks": summary["chunks"]}


def _bad_plan(payload: dict, ctx: Any) -> list:
    return [{"row": 1}, {"row": 2}]


def _bad_row(chunk: dict, ctx: Any) -> dict:
    if chunk["row"] == 2:
        raise PermanentError("row 2 is malformed")
    return {"ok": chunk["row"]}


def register_test_handlers() -> None:
    """Register the chunked jobs above (again: registering the same object twice is harmless)."""
    chunked_job("test.sum")(Sum)
    chunked_job("test.bad_row", plan=_bad_plan)(_bad_row)


def unregister_test_handlers() -> None:
    unregister("test.sum")
    unregister("test.bad_row")


@pytest.fixture(autouse=True, scope="module")
def _test_handlers() -> Iterator[None]:
    register_test_handlers()
    yield
    unregister_test_handlers()


@pytest.fixture(autouse=True)
def _reset_calls() -> Iterator[None]:
    CALLS.clear()
    FAIL_ONCE.clear()
    yield
    CALLS.clear()
    FAIL_ONCE.clear()


# --- environment ---------------------------------------------------------------------------------


@dataclass
class Env:
    kit: Kit
    sfn: Any
    arn: str
    long_url: str
    seen: list[dict] = field(default_factory=list)

    def runner(self, owner: str, heartbeat: float = 3600.0) -> ChunkRunner:
        settings = self.kit.aws.settings
        return ChunkRunner(
            attempts=self.kit.attempts,
            outputs=self.kit.outputs,
            chunks=ChunkStore(self.kit.dynamo, settings.leases_table),
            sqs=self.kit.aws.clients.sqs,
            stepfunctions=StepFunctions.of(self.sfn),
            state_machine_arn=self.arn,
            clock=self.kit.clock,
            owner=owner,
            heartbeat_seconds=heartbeat,
            metrics=self.kit.metrics,
            queue_urls=settings.queue_urls,  # as the deployment wires it: the chunk queue by pool
        )

    def worker(self, owner: str = "worker-a", heartbeat: float = 3600.0) -> Deliveries:
        runner = self.runner(owner, heartbeat)
        worker = Worker(
            config=WorkerConfig(owner=owner, heartbeat_seconds=heartbeat),
            attempts=self.kit.attempts,
            outputs=self.kit.outputs,
            queues=self.kit.queues,
            clock=self.kit.clock,
            metrics=self.kit.metrics,
            rng=random.Random(7),
            chunks=runner,
        )
        return Deliveries(worker, runner)

    def executions(self) -> list[dict]:
        return self.sfn.list_executions(stateMachineArn=self.arn)["executions"]

    def status(self, name: str) -> dict:
        return self.sfn.describe_execution(executionArn=self.runner("x").execution_arn(name))

    def drain(
        self,
        worker: Worker,
        until: Callable[[], bool],
        on_message: Callable[[dict, str], None] | None = None,
        queue_url: str | None = None,
    ) -> list[str]:
        """Feed every message of the long queue (or ``queue_url``'s) to ``worker`` until ``until()``;
        return the outcomes."""
        sqs = self.kit.aws.clients.sqs
        url = queue_url or self.long_url
        outcomes: list[str] = []
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not until():
            assert time.monotonic() < deadline, f"workflow did not finish; outcomes so far {outcomes}"
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
            for message in got.get("Messages", []):
                body, receipt = message["Body"], message["ReceiptHandle"]
                self.seen.append(json.loads(body))
                out = worker.handle(
                    Delivery(message_id="", body=body, receipt_handle=receipt, queue_url=url),
                    self.kit.clock.now(),
                )
                outcomes.append(out.status)
                if on_message is not None:
                    on_message(json.loads(body), out.status)
                if not out.defer:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=receipt)
            if not got.get("Messages"):
                time.sleep(0.02)  # poll interval of moto's real-time interpreter, not a wait for an outcome
        return outcomes

    def finished(self, name: str) -> Callable[[], bool]:
        return lambda: self.status(name)["status"] != "RUNNING"


@pytest.fixture
def env(monkeypatch, clock) -> Iterator[Env]:
    _fake_credentials(monkeypatch)
    with chunked_environment(clock) as environment:
        yield environment


@contextmanager
def chunked_environment(clock) -> Iterator[Env]:
    """moto with Step Functions executing: every table, queue and the bucket, and the chunked-job
    state machine over the long queue (2 chunks at a time, retries after 1 s)."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        clients = Clients(region_name=REGION)
        prefix = f"chunked-{uuid.uuid4().hex[:8]}"  # a stray execution thread never writes into another test
        settings = provision(clients, prefix=prefix)
        definition = chunked_job_definition(
            settings.queue_urls["long"], max_concurrency=2, heartbeat_seconds=60, retry_interval_seconds=1
        )
        arn = clients.stepfunctions.create_state_machine(
            name=f"{prefix}-chunked", definition=json.dumps(definition), roleArn=ROLE
        )["stateMachineArn"]
        settings = replace(settings, state_machine_arn=arn)
        kit = Kit(AwsEnv(settings=settings, clients=clients), clock)
        yield Env(kit=kit, sfn=clients.stepfunctions, arn=arn, long_url=settings.queue_urls["long"])
        for execution in clients.stepfunctions.list_executions(stateMachineArn=arn, statusFilter="RUNNING")[
            "executions"
        ]:
            try:  # moto's stop can race an execution that has not built its environment yet
                clients.stepfunctions.stop_execution(executionArn=execution["executionArn"])
            except Exception:  # teardown only: a stray thread dies with the mock
                pass


def unique_job_id() -> str:
    """moto keeps Step Functions executions across mocks: a run id (hence an execution name) of its own."""
    return f"job-{uuid.uuid4().hex[:12]}"


def _start(env: Env, handler: str = "test.sum", payload: dict | None = None, **kw: Any):
    kw.setdefault("job_id", unique_job_id())
    run, msg = env.kit.new_run({"handler": handler}, payload if payload is not None else {"chunks": 3}, **kw)
    out = env.worker().handle(Delivery.of(msg.to_json()), env.kit.clock.now())
    return run, msg, out


# --- tests ---------------------------------------------------------------------------------------


def test_a_chunked_run_is_started_as_an_execution_named_after_the_run(env):
    # When a worker processes the message of a run whose handler is a chunked job
    run, _, out = _start(env)
    # Then one execution named after the run is running, and the run is handed over to it at 0/?
    name = execution_name(run.id)
    assert out.status == "chunked_started" and not out.defer
    assert [e["name"] for e in env.executions()] == [name]
    stored = env.kit.runs.get(run.id)
    assert stored.state is RunState.RUNNING and stored.lease_owner == sfn_owner(name)
    assert stored.progress == {"done": 0, "total": None}


def test_the_workflow_runs_every_chunk_and_the_run_succeeds_with_the_completion_output(env):
    # Given a started chunked run of three chunks
    run, _, _ = _start(env)
    name = execution_name(run.id)
    # When the long queue is drained through the worker until the execution ends
    env.drain(env.worker(), env.finished(name))
    # Then the execution succeeded, the run succeeded with complete()'s output and progress 3/3
    assert env.status(name)["status"] == "SUCCEEDED"
    stored = env.kit.runs.get(run.id)
    assert stored.state is RunState.SUCCEEDED
    assert stored.output == {"total": sum(range(9)), "chunks": 3}
    assert stored.progress == {"done": 3, "total": 3}
    # And the run counts one start and one ending (usage: runs_started = succeeded + failed + cancelled)
    assert env.kit.metrics.count(RUNS_SUCCEEDED) == 1 and env.kit.metrics.count(CHUNKED_RUNS_STARTED) == 1
    # And complete() got every chunk's output in index order
    (summary,) = [c[1] for c in CALLS if c[0] == "complete"]
    assert summary == {"chunks": 3, "outputs": [{"sum": 3}, {"sum": 12}, {"sum": 21}]}


def test_a_chunk_failing_retryably_is_retried_and_resumes_from_its_checkpoint(env):
    # Given chunk 1 fails (retryably) at its third item, after checkpointing the first two
    FAIL_ONCE.add((1, 2))
    run, _, _ = _start(env)
    name = execution_name(run.id)
    # When the workflow is drained
    outcomes = env.drain(env.worker(), env.finished(name))
    # Then the failed chunk was sent again and its retry started at item 2, not item 0
    assert "chunk_failed" in outcomes
    assert [c[1] for c in CALLS if c[0] == "chunk" and c[1][0] == 1] == [(1, 0), (1, 2)]
    # And the run still succeeded with the right total
    stored = env.kit.runs.get(run.id)
    assert stored.state is RunState.SUCCEEDED and stored.output["total"] == sum(range(9))


def test_a_permanent_chunk_failure_fails_the_run_into_the_dead_letters(env):
    # Given a chunked job whose second chunk fails permanently
    run, _, _ = _start(env, "test.bad_row", {})
    name = execution_name(run.id)
    # When the workflow is drained
    env.drain(env.worker(), lambda: env.kit.runs.get(run.id).state is not RunState.RUNNING)
    # Then the run failed and is a dead letter that names the error and can be replayed
    stored = env.kit.runs.get(run.id)
    assert stored.state is RunState.FAILED and "row 2 is malformed" in stored.error
    item = env.kit.attempts.get_item(run.id)
    assert item["dl_reason"] == "chunk_failed"
    # (its snapshot names the version the run was bound to, so a replay runs it: decision 0048)
    assert json.loads(item["dl_message"])["target"] == {"handler": "test.bad_row", "version": 1}
    dead, _ = env.kit.runs.list_dead_letters("acme")
    assert [d.id for d in dead] == [run.id]
    assert env.kit.metrics.count(RUNS_DEAD_LETTERED) == 1
    assert env.status(name)["status"] in ("FAILED", "RUNNING")  # the Fail state follows the record


def test_a_redelivered_chunk_message_for_a_done_chunk_is_answered_without_running_it_again(env):
    # Given a running chunked run
    run, _, _ = _start(env)
    name = execution_name(run.id)
    worker = env.worker()
    redelivered: list[str] = []

    def deliver_first_chunk_twice(body: dict, status: str) -> None:
        if body["kind"] == KIND_RUN and body["index"] == 0 and not redelivered:
            again = worker.handle(Delivery.of(json.dumps(body)), env.kit.clock.now())
            redelivered.append(again.status)

    # When the first chunk's message is delivered a second time after it was done
    env.drain(worker, env.finished(name), deliver_first_chunk_twice)
    # Then the second delivery was answered from the record, the chunk ran once, counted once
    assert redelivered == ["chunk_already_done"]
    assert [c[1] for c in CALLS if c[0] == "chunk" and c[1][0] == 0] == [(0, 0)]
    assert env.kit.runs.get(run.id).progress == {"done": 3, "total": 3}


def test_a_second_delivery_after_the_lease_expired_does_not_start_a_second_execution(env, clock):
    # Given a started chunked run whose lease expired with no news (a long backlog)
    run, msg, _ = _start(env)
    clock.advance(seconds=PARENT_LEASE_SECONDS + 1)
    # When another delivery of the run's message takes the run over
    out = env.worker("worker-b").handle(Delivery.of(msg.to_json()), clock.now())
    # Then there is still one execution, the run is handed back to it, and the workflow completes
    name = execution_name(run.id)
    assert out.status in ("chunked_started", "chunked_running")
    assert [e["name"] for e in env.executions()] == [name]
    stored = env.kit.runs.get(run.id)
    assert stored.attempt == 2 and stored.lease_owner == sfn_owner(name)
    env.drain(env.worker(), env.finished(name))
    assert env.kit.runs.get(run.id).state is RunState.SUCCEEDED


def test_cancelling_a_chunked_run_stops_its_execution(env):
    # Given a running chunked run that the user cancelled
    run, _, _ = _start(env)
    name = execution_name(run.id)
    env.kit.runs.request_cancel(env.kit.runs.get(run.id))
    stops: list[dict] = []
    env.sfn.meta.events.register(
        "provide-client-params.states.StopExecution", lambda params, **_: stops.append(dict(params))
    )
    # When the next workflow message reaches a worker
    env.drain(env.worker(), lambda: env.kit.runs.get(run.id).state is not RunState.RUNNING)
    # Then the run is cancelled without running a chunk, and its execution was told to stop
    # (moto reflects a stop only once the waiting task returns, so the request is what is checked)
    assert env.kit.runs.get(run.id).state is RunState.CANCELLED
    assert [c for c in CALLS if c[0] == "chunk"] == []
    assert [(p["executionArn"].rsplit(":", 1)[-1], p["error"]) for p in stops] == [
        (name, "jobsched.Cancelled")
    ]
    assert env.kit.metrics.count(RUNS_CANCELLED) == 1


def test_a_chunked_job_without_a_state_machine_is_a_permanent_failure_that_says_why(aws, clock):
    # Given a worker of a deployment without Step Functions
    kit = Kit(aws, clock)
    run, msg = kit.new_run({"handler": "test.sum"}, {"chunks": 1}, job_id=unique_job_id())
    # When it gets a chunked run
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    # Then the run is dead-lettered with a message naming what is missing
    assert out.status == "dead_lettered"
    assert "needs Step Functions" in kit.runs.get(run.id).error


def test_registering_the_same_chunked_class_twice_is_harmless():
    # When the module defining a chunked job is imported again (same class re-registered)
    chunked_job("test.sum")(Sum)
    # Then nothing is raised and the name still resolves to a chunked job
    from jobsched.long_jobs.chunked import get_chunked

    assert get_chunked("test.sum") is not None
