"""Chunked jobs on the container pool, through the container worker loop: a chunked run on the
container pool has its execution send every chunk task to the container queue, and the loop
(jobsched/compose/container_worker.py) answers them through the same chunk runner as the worker
function. moto's Step Functions executes the workflow."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from jobsched.compose.container_worker import LoopConfig, container_worker_from_settings
from jobsched.core.models import RunState
from jobsched.long_jobs.chunked import execution_name
from tests.aws.conftest import _fake_credentials
from tests.aws.test_chunked import (
    CALLS,
    Env,
    _start,
    chunked_environment,
    register_test_handlers,
    unregister_test_handlers,
)


@pytest.fixture(autouse=True, scope="module")
def _test_handlers() -> Iterator[None]:
    register_test_handlers()
    yield
    unregister_test_handlers()


@pytest.fixture
def env(monkeypatch, clock) -> Iterator[Env]:
    _fake_credentials(monkeypatch)
    CALLS.clear()
    with chunked_environment(clock) as environment:
        yield environment
    CALLS.clear()


def test_the_container_worker_runs_a_chunked_jobs_chunks_from_the_container_queue(env, monkeypatch):
    # Given a chunked run of three chunks on the container pool, started by a worker
    run, _, started = _start(env, pool="container")
    name = execution_name(run.id)
    settings = replace(env.kit.aws.settings, state_machine_arn=env.arn)
    for name_, value in settings.to_env().items():  # the loop's environment, as the stack gives it
        monkeypatch.setenv(name_, value)
    config = LoopConfig(concurrency=2, stop_timeout_seconds=5, wait_seconds=0)
    loop = container_worker_from_settings(
        settings, env.kit.aws.clients, config=config, clock=env.kit.clock, owner="container:chunks"
    )
    # When the container worker consumes the container queue until the execution ends
    loop.start()
    try:
        deadline = time.monotonic() + 60
        while env.status(name)["status"] == "RUNNING":
            assert time.monotonic() < deadline, f"the workflow did not finish: {loop.outcomes}"
            time.sleep(0.1)
    finally:
        loop.stop()
    # Then every step was answered by the chunk runner in the loop, and the run succeeded
    assert started.status == "chunked_started"
    assert env.status(name)["status"] == "SUCCEEDED"
    stored = env.kit.runs.get(run.id)
    assert stored.state is RunState.SUCCEEDED and stored.output == {"total": sum(range(9)), "chunks": 3}
    # (plan, the three chunks and the completion, each through the loop)
    statuses = [o.status for o in loop.outcomes]
    assert (statuses.count("chunk_planned"), statuses.count("chunk_succeeded")) == (1, 3)
    assert statuses.count("succeeded") == 1
