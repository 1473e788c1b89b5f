"""Usage of chunked runs (decision 0059 amended): the state transitions Step Functions bills an
execution, counted by the worker side for the run's tenant, against moto's own execution history."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from jobsched.long_jobs.chunk_runner import ChunkRunner
from jobsched.long_jobs.chunked import execution_name
from jobsched.services.deliveries import Deliveries, Delivery
from jobsched.services.usage import TenantMeter
from jobsched.services.worker import Worker, WorkerConfig
from tests.aws.conftest import _fake_credentials
from tests.aws.test_chunked import (  # noqa: F401  (the module's handler registration fixture)
    FAIL_ONCE,
    Env,
    _test_handlers,
    chunked_environment,
    unique_job_id,
)


@pytest.fixture
def env(monkeypatch, clock) -> Iterator[Env]:
    _fake_credentials(monkeypatch)
    with chunked_environment(clock) as environment:
        yield environment


def metered_worker(env: Env, meter: TenantMeter) -> Deliveries:
    """The worker and chunk runner of tests/aws/test_chunked.py, counting on ``meter``."""
    settings = env.kit.aws.settings
    runner = ChunkRunner(
        attempts=env.kit.attempts,
        outputs=env.kit.outputs,
        chunks=env.runner("x").chunks,
        sqs=env.kit.aws.clients.sqs,
        stepfunctions=env.runner("x").sfn,
        state_machine_arn=env.arn,
        clock=env.kit.clock,
        owner="worker-a",
        heartbeat_seconds=3600.0,
        metrics=env.kit.metrics,
        queue_urls=settings.queue_urls,
        meter=meter,
    )
    worker = Worker(
        config=WorkerConfig(owner="worker-a", heartbeat_seconds=3600.0),
        attempts=env.kit.attempts,
        outputs=env.kit.outputs,
        queues=env.kit.queues,
        clock=env.kit.clock,
        metrics=env.kit.metrics,
        rng=random.Random(7),
        chunks=runner,
    )
    return Deliveries(worker, runner)


def billed_transitions(env: Env, name: str) -> int:
    """What Step Functions bills the execution, from its history: each state entered (``*StateEntered``)
    and each retry of a task (a ``TaskScheduled`` more than its task states entered)."""
    arn = env.runner("x").execution_arn(name)
    events = env.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    entered = sum(1 for e in events if e["type"].endswith("StateEntered"))
    scheduled = sum(1 for e in events if e["type"] == "TaskScheduled")
    tasks_entered = sum(1 for e in events if e["type"] == "TaskStateEntered")
    return entered + (scheduled - tasks_entered)


@pytest.mark.parametrize(
    ("handler", "payload", "flaky"),
    [("test.sum", {"chunks": 3}, None), ("test.sum", {"chunks": 3}, (1, 2)), ("test.bad_row", {}, None)],
    ids=["succeeds", "a-chunk-retried", "fails-for-good"],
)
def test_a_chunked_runs_transitions_are_counted_for_its_tenant_as_step_functions_enters_its_states(
    env, handler, payload, flaky
):
    # Given a chunked run of tenant acme (with ``flaky``: chunk 1 fails once, and Step Functions
    # retries it), started and drained through a worker counting on a meter
    if flaky:
        FAIL_ONCE.add(flaky)
    meter = TenantMeter()
    worker = metered_worker(env, meter)
    run, msg = env.kit.new_run({"handler": handler}, payload, job_id=unique_job_id(), tenant="acme")
    worker.handle(Delivery.of(msg.to_json()), env.kit.clock.now())
    name = execution_name(run.id)
    env.drain(worker, env.finished(name))
    # When the meter settles
    settled = meter.settle()
    # Then acme's sfn_transitions are the states the execution entered and its retries, as moto's
    # history has them
    entered = billed_transitions(env, name)
    assert entered > 0
    assert settled["acme"]["sfn_transitions"] == entered
    # And no other tenant was counted any
    assert all(u["sfn_transitions"] == 0 for t, u in settled.items() if t != "acme")
