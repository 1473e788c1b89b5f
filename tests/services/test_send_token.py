"""Only the newest message of a run executes: each send records a token on the run, in a write that
happens anyway, and the worker's claim accepts only that token (decision 0014, the pause/resume case of
decision 0010)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from jobsched.core.models import RunState, make_run_id
from jobsched.services.deliveries import Delivery
from jobsched.services.jobs import JobService
from tests.aws.conftest import T0
from tests.aws.conftest_worker import Kit, sent_messages
from tests.aws.memory import memory_aws, memory_pipeline  # noqa: F401  (this file runs on the in-memory fakes)

S = timedelta(seconds=1)
EVERY_SECOND = {"name": "s", "schedule": "* * * * * *", "target": {"handler": "demo.echo"}}


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def jobs(pipeline):
    d = pipeline.dispatcher
    return JobService(d.jobs, d.runs, d)


def bodies_for(pipeline, run_id: str) -> list[dict]:
    return [m["body"] for m in pipeline.messages() if m["body"]["run_id"] == run_id]


def test_a_revived_runs_old_message_is_dropped_and_the_new_one_runs_the_edit(pipeline, jobs, kit):
    # Given a per-second job whose runs are queued ahead, paused, its payload edited while paused,
    # and resumed: its withdrawn runs are revived with a new message
    job = jobs.create("acme", EVERY_SECOND | {"payload": {"v": 1}}, T0)
    jobs.pause("acme", job.id, T0 + S / 2)
    paused = jobs.get("acme", job.id)
    jobs.update("acme", job.id, {"payload": {"v": 2}}, paused.version, T0 + S)
    jobs.resume("acme", job.id, T0 + 2.5 * S)
    run_id = make_run_id(job.id, T0 + 10 * S)
    old, new = bodies_for(pipeline, run_id)  # oldest first: the pause left the first in the queue
    assert (old["payload"], new["payload"]) == ({"v": 1}, {"v": 2}) and old["token"] != new["token"]
    worker = kit.worker()
    # When the old message arrives first, Then it is acknowledged and dropped, the run stays queued
    stale = worker.handle(Delivery.of(json.dumps(old)), T0 + 10 * S)
    assert (stale.status, stale.detail, stale.defer) == ("stale", {"superseded": True}, False)
    assert kit.runs.get(run_id).state is RunState.QUEUED
    # And the new one runs it, with the payload as edited
    assert worker.handle(Delivery.of(json.dumps(new)), T0 + 10 * S).status == "succeeded"
    assert kit.runs.get(run_id).output == {"v": 2}


def test_when_the_new_message_runs_first_the_old_one_finds_the_run_finished(pipeline, jobs, kit):
    job = jobs.create("acme", EVERY_SECOND | {"payload": {"v": 1}}, T0)
    jobs.pause("acme", job.id, T0 + S / 2)
    jobs.resume("acme", job.id, T0 + 2.5 * S)
    run_id = make_run_id(job.id, T0 + 10 * S)
    old, new = bodies_for(pipeline, run_id)
    worker = kit.worker()
    assert worker.handle(Delivery.of(json.dumps(new)), T0 + 10 * S).status == "succeeded"
    assert worker.handle(Delivery.of(json.dumps(old)), T0 + 10 * S).status == "finished"
    assert [a.attempt for a in kit.runs.get(run_id).attempts] == [1]


def test_the_token_costs_no_extra_write(pipeline, jobs):
    # Given a job dispatched: each run is one PutItem carrying its token, its message the same token
    pipeline.meter.reset()
    job = jobs.create("acme", EVERY_SECOND, T0)
    runs, _ = pipeline.dispatcher.runs.list_for_job(job.id, limit=100)
    messages = {m["body"]["run_id"]: m["body"]["token"] for m in pipeline.messages()}
    assert {r.id: r.send_token for r in runs} == messages
    assert pipeline.meter.requests["dynamodb.PutItem"] == len(runs) + 1  # and the job's own
    assert pipeline.meter.requests["dynamodb.UpdateItem"] <= 1  # the job's advance, nothing per run


def test_a_retry_message_carries_the_token_its_mark_records(kit):
    # Given a run whose first attempt fails with a retryable error
    run, msg = kit.new_run({"handler": "demo.fail"}, {"kind": "retryable"})
    out = kit.worker().handle(Delivery.of(msg.to_json()), kit.clock.now())
    assert out.status == "retrying"
    [(retry, _)] = sent_messages(kit.aws)
    # Then the retry message's token is the run's, and the first message, delivered again, is stale
    assert retry["token"] == kit.runs.get(run.id).send_token
    again = kit.worker("worker-b").handle(Delivery.of(msg.to_json()), kit.clock.now())
    assert again.status == "stale"


def test_a_message_without_a_token_is_not_checked(kit):
    # Given a message sent before tokens existed (none in its body) for a run that has a token
    run, msg = kit.new_run()
    assert msg.token is None and kit.runs.get(run.id).send_token is not None
    # When it is delivered, Then it runs the attempt
    assert kit.worker().handle(Delivery.of(msg.to_json()), kit.clock.now()).status == "succeeded"
