"""Chunked jobs: heartbeats against a short HeartbeatSeconds, a run whose execution ended without it,
the demo job end to end, and the worker factory. Shares the moto environment of test_chunked."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from jobsched.compose.pipeline import worker_from_settings
from jobsched.core.clock import FakeClock
from jobsched.core.models import RunState
from jobsched.long_jobs.asl import chunked_job_definition
from jobsched.long_jobs.chunk_runner import ChunkRunner
from jobsched.long_jobs.chunked import chunked_job, execution_name
from jobsched.long_jobs.parent import PARENT_LEASE_SECONDS
from jobsched.services.deliveries import Delivery
from jobsched.targets.registry import unregister
from tests.aws.conftest import T0, _fake_credentials
from tests.aws.test_chunked import (
    CALLS,
    FAIL_ONCE,
    ROLE,
    Env,
    _start,
    chunked_environment,
    register_test_handlers,
    unique_job_id,
    unregister_test_handlers,
)

SLOW_CHUNK_SECONDS = 2.5


@pytest.fixture(autouse=True, scope="module")
def _test_handlers() -> Iterator[None]:
    register_test_handlers()
    chunked_job("test.slow", plan=_one_chunk)(_slow)
    chunked_job("test.big", plan=_two_chunks, complete=_lengths)(_big)
    yield
    unregister_test_handlers()
    unregister("test.slow")
    unregister("test.big")


@pytest.fixture
def env(monkeypatch, clock) -> Iterator[Env]:
    _fake_credentials(monkeypatch)
    CALLS.clear()
    FAIL_ONCE.clear()
    with chunked_environment(clock) as environment:
        yield environment
    CALLS.clear()


def _one_chunk(payload: dict, ctx: Any) -> list:
    return ["slow"]


def _slow(chunk: str, ctx: Any) -> dict:
    """Takes longer than the workflow's HeartbeatSeconds (1 s): only heartbeats keep the task alive."""
    CALLS.append(("chunk", chunk))
    ctx.cancel_event.wait(SLOW_CHUNK_SECONDS)
    return {"chunk": chunk}


def _two_chunks(payload: dict, ctx: Any) -> list:
    return ["a", "b"]


def _big(chunk: str, ctx: Any) -> dict:
    """An output over the 4 KB inline limit: stored in S3, handed to complete() all the same."""
    return {"blob": chunk * 5000}


def _lengths(payload: dict, ctx: Any, summary: dict) -> list:
    return [len(o["blob"]) for o in summary["outputs"]]


def _short_heartbeat_env(env: Env) -> Env:
    definition = chunked_job_definition(env.long_url, heartbeat_seconds=1, retry_interval_seconds=1)
    arn = env.sfn.create_state_machine(name="heartbeat-1s", definition=json.dumps(definition), roleArn=ROLE)[
        "stateMachineArn"
    ]
    return Env(kit=env.kit, sfn=env.sfn, arn=arn, long_url=env.long_url)


def test_heartbeats_keep_a_chunk_longer_than_heartbeat_seconds_alive(env):
    # Given a workflow whose tasks time out after 1 s of silence, and a chunk that takes 2.5 s
    fast = _short_heartbeat_env(env)
    beats: list[str] = []
    lock = threading.Lock()

    def count(params: dict, **_: Any) -> None:
        with lock:
            beats.append(params["taskToken"])

    fast.sfn.meta.events.register("provide-client-params.states.SendTaskHeartbeat", count)
    run, msg = fast.kit.new_run({"handler": "test.slow"}, {}, job_id=unique_job_id())
    fast.worker(heartbeat=0.2).handle(Delivery.of(msg.to_json()), fast.kit.clock.now())
    name = execution_name(run.id)
    # When the worker (heartbeat every 0.2 s) drains the workflow
    fast.drain(fast.worker(heartbeat=0.2), fast.finished(name))
    # Then the chunk ran once (no heartbeat timeout, no retry) and the run succeeded
    assert [c for c in CALLS if c[0] == "chunk"] == [("chunk", "slow")]
    assert fast.status(name)["status"] == "SUCCEEDED"
    assert fast.kit.runs.get(run.id).state is RunState.SUCCEEDED
    assert len(beats) >= int(SLOW_CHUNK_SECONDS / 0.2) // 2


def test_a_chunked_job_on_the_container_pool_runs_every_step_from_the_container_queue(env):
    # Given a chunked run on the container pool (3 chunks)
    run, _, out = _start(env, pool="container")
    assert out.status == "chunked_started"
    name = execution_name(run.id)
    container_url = env.kit.aws.settings.queue_urls["container"]
    # Then its execution was started with the container queue as its chunk queue
    described = env.status(name)
    assert json.loads(described["input"])["queue_url"] == container_url
    # When a worker drains the container queue
    outcomes = env.drain(env.worker(), env.finished(name), queue_url=container_url)
    # Then the plan, every chunk and the completion came from it, and the run succeeded
    kinds = [m["kind"] for m in env.seen]
    assert (
        kinds.count("chunk.plan") == 1
        and kinds.count("chunk.run") == 3
        and kinds.count("chunk.complete") == 1
    )
    assert outcomes
    assert env.status(name)["status"] == "SUCCEEDED"
    assert env.kit.runs.get(run.id).state is RunState.SUCCEEDED
    # And nothing of it went to the long queue
    sqs = env.kit.aws.clients.sqs
    assert sqs.receive_message(QueueUrl=env.long_url, MaxNumberOfMessages=10).get("Messages", []) == []


def test_a_run_whose_execution_succeeded_without_it_takes_the_execution_result(env, clock):
    # Given a chunked run whose workflow completed, but whose own success write was lost
    run, msg, _ = _start(env, payload={"chunks": 2})
    name = execution_name(run.id)
    env.drain(env.worker(), env.finished(name))
    table, key = env.kit.aws.settings.runs_table, {"job_id": run.job_id, "run_key": run.run_key}
    env.kit.dynamo.update(
        table,
        key,
        "SET #state = :running, lease_until = :lu, lease_owner = :o REMOVE #output, finished_at",
        names={"#state": "state", "#output": "output"},
        values={":running": "running", ":lu": "2026-03-02T12:00:01.000Z", ":o": f"sfn:{name}"},
    )
    clock.advance(seconds=PARENT_LEASE_SECONDS + 60)
    # When the run's message is delivered again (the sweeper re-sends a run whose lease expired)
    out = env.worker("worker-b").handle(Delivery.of(msg.to_json()), clock.now())
    # Then no second execution starts and the run succeeds with the execution's completion output
    assert out.status == "succeeded"
    assert len(env.executions()) == 1
    stored = env.kit.runs.get(run.id)
    assert stored.state is RunState.SUCCEEDED and stored.output == {"total": sum(range(6)), "chunks": 2}


def test_the_demo_chunked_sum_adds_every_number(env):
    import jobsched.long_jobs.demo  # noqa: F401  (opt-in demo: registers demo.chunked_sum)

    # Given the demo job over 1..10 in 4 chunks, without pauses
    run, _, _ = _start(
        env, "demo.chunked_sum", {"numbers": list(range(1, 11)), "chunks": 4, "item_seconds": 0}
    )
    name = execution_name(run.id)
    # When the workflow is drained
    env.drain(env.worker(), env.finished(name))
    # Then the run's output is the sum and its progress shows every chunk done
    stored = env.kit.runs.get(run.id)
    assert stored.output == {"sum": 55, "chunks": 4}
    assert stored.progress == {"done": 4, "total": 4}


def test_the_worker_factory_adds_the_chunk_runner_only_with_a_state_machine(env):
    settings = env.kit.aws.settings
    clock = FakeClock(T0)
    # Then a deployment with a state machine gets a runner, one without gets none
    with_sm = worker_from_settings(settings, env.kit.aws.clients, clock, "w")
    without = worker_from_settings(
        type(settings)(**{**settings.__dict__, "state_machine_arn": None}), env.kit.aws.clients, clock, "w"
    )
    runner = with_sm.handler_of(ChunkRunner)
    assert runner is not None and runner.state_machine_arn == env.arn
    assert without.handler_of(ChunkRunner) is None


def test_a_plan_with_no_chunks_completes_at_once_with_an_empty_summary(env):
    # Given a chunked run whose plan yields no chunks
    run, _, _ = _start(env, payload={"chunks": 0})
    name = execution_name(run.id)
    # When the workflow is drained
    env.drain(env.worker(), env.finished(name))
    # Then complete() ran with an empty summary and the run succeeded at 0/0
    assert [c[1] for c in CALLS if c[0] == "complete"] == [{"chunks": 0, "outputs": []}]
    stored = env.kit.runs.get(run.id)
    assert stored.state is RunState.SUCCEEDED and stored.progress == {"done": 0, "total": 0}


def test_a_replayed_chunked_run_starts_a_new_execution_from_scratch(env, clock):
    from tests.aws.conftest_worker import run_service

    # Given a chunked run that failed permanently in its second chunk
    run, _, _ = _start(env, "test.bad_row", {})
    env.drain(env.worker(), lambda: env.kit.runs.get(run.id).state is RunState.FAILED)
    # When the dead letter is replayed and the replay's message processed
    clock.advance(seconds=60)
    run_service(env.kit).replay("acme", run.id, clock.now())
    replays = [m for m in env.kit.bodies("default") if m.get("run_id") == run.id and m["attempt"] > 1]
    out = env.worker().handle(Delivery.of(json.dumps(replays[-1])), clock.now())
    # Then a second execution (the replay's name) drives the run, with progress back at 0/?
    assert out.status == "chunked_started"
    names = {e["name"] for e in env.executions()}
    assert names == {execution_name(run.id), execution_name(run.id, 1)}
    stored = env.kit.runs.get(run.id)
    assert stored.state is RunState.RUNNING and stored.progress == {"done": 0, "total": None}


def test_chunk_outputs_over_the_inline_limit_reach_complete_through_s3(env):
    # Given chunks whose outputs are 5000 bytes each
    run, _, _ = _start(env, "test.big", {})
    name = execution_name(run.id)
    # When the workflow is drained
    env.drain(env.worker(), env.finished(name))
    # Then complete() saw both outputs whole, and they were kept in S3, not on the chunk records
    assert env.kit.runs.get(run.id).output == [5000, 5000]
    keys = env.kit.aws.clients.s3.list_objects_v2(Bucket=env.kit.aws.settings.bucket)["Contents"]
    assert sorted(k["Key"].rsplit("/", 1)[-1] for k in keys) == [
        f"{name}-chunk-0-output.json",
        f"{name}-chunk-1-output.json",
    ]


def test_a_message_of_an_execution_that_no_longer_drives_its_run_is_dropped_and_the_execution_stopped(env):
    # Given a chunked run that finished, and a copy of one of its chunk messages
    run, _, _ = _start(env, payload={"chunks": 1})
    name = execution_name(run.id)
    env.drain(env.worker(), env.finished(name))
    (chunk_message,) = [m for m in env.seen if m["kind"] == "chunk.run"]
    stops: list[dict] = []
    env.sfn.meta.events.register(
        "provide-client-params.states.StopExecution", lambda params, **_: stops.append(dict(params))
    )
    # When the copy is delivered late
    out = env.worker().handle(Delivery.of(json.dumps(chunk_message)), env.kit.clock.now())
    # Then it is acknowledged as stale without running the chunk, and its execution is told to stop
    assert out.status == "chunk_stale" and not out.defer
    assert len([c for c in CALLS if c[0] == "chunk"]) == 1
    assert [p["executionArn"] for p in stops] == [chunk_message["execution_id"]]
    assert env.kit.runs.get(run.id).state is RunState.SUCCEEDED


def _versioned(version: int) -> Any:
    """Version ``version`` of test.versioned: one chunk; its completion says which version ran it,
    with the payload it got (version 2 takes ``count`` where version 1 took ``n``)."""

    def complete(payload: dict, ctx: Any, summary: dict) -> dict:
        return {"version": version, "payload": payload}

    def run_chunk(chunk: Any, ctx: Any) -> None:
        return None

    run_chunk.__qualname__ = f"versioned_v{version}"
    upgrades = {1: lambda p: {"count": p["n"]}} if version == 2 else None
    return chunked_job(
        "test.versioned", plan=_one_chunk, complete=complete, version=version, upgrades=upgrades
    )(run_chunk)


@pytest.fixture
def versioned() -> Iterator[None]:
    yield
    unregister("test.versioned")


def test_a_chunked_run_keeps_the_version_its_start_bound_across_a_deploy(env, versioned):
    # Given a chunked job at version 1 whose run was started (the claim binds it to version 1)
    _versioned(1)
    run, _, out = _start(env, "test.versioned", {"n": 5})
    assert out.status == "chunked_started" and env.kit.runs.get(run.id).handler_version == 1
    # When a deploy registers version 2 beside it and the workflow is drained
    _versioned(2)
    name = execution_name(run.id)
    env.drain(env.worker(), env.finished(name))
    # Then its steps ran version 1, with the payload as written
    assert env.kit.runs.get(run.id).output == {"version": 1, "payload": {"n": 5}}


def test_a_chunked_run_bound_to_a_newer_version_gets_its_payload_upgraded(env, versioned):
    # Given versions 1 and 2 and a run whose job's payload was written for version 1
    _versioned(1)
    _versioned(2)
    run, msg = env.kit.new_run({"handler": "test.versioned"}, {"n": 5}, job_id=unique_job_id())
    msg.payload_version = 1
    env.worker().handle(Delivery.of(msg.to_json()), env.kit.clock.now())
    # When the workflow is drained
    env.drain(env.worker(), env.finished(execution_name(run.id)))
    # Then the run was bound to version 2, whose completion got the upgraded payload
    stored = env.kit.runs.get(run.id)
    assert stored.handler_version == 2 and stored.output == {"version": 2, "payload": {"count": 5}}
