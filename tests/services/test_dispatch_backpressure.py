"""Backpressure by depth on the in-memory fakes: a tick holds back due ``low`` jobs while the ``low`` queue's
visible backlog is at or over its ``depth`` limit; ``high`` jobs are never held back, ``default`` ones
only with a limit of their own (tests/aws/test_backpressure_age.py: by age)."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import timedelta

from jobsched.aws.queues import RunQueues
from jobsched.core.backpressure import QueueLimit
from jobsched.core.models import RunState, Trigger, make_run_id
from jobsched.services.backpressure import Backpressure
from tests.aws.conftest import T0, AwsEnv, Pipeline
from tests.aws.memory import build_pipeline, memory_aws  # noqa: F401  (on the in-memory fakes)

LIMIT = 5
EVERY_MINUTE = {"schedule": "* * * * *", "target": {"handler": "echo"}}
READS = "sqs.GetQueueAttributes"


def _pipeline(aws: AwsEnv, limit: int = LIMIT) -> Pipeline:
    """A one-shard pipeline (one tick = one shard) with the given depth limit on ``low`` (age off)."""
    settings = replace(aws.settings, shards=1, backpressure={"low": QueueLimit(depth=limit)})
    return build_pipeline(AwsEnv(settings=settings, clients=aws.clients))


def _job(p: Pipeline, name: str, priority: str, **spec):
    return p.jobs.create("acme", EVERY_MINUTE | {"name": name, "priority": priority} | spec, T0)


def _backlog(p: Pipeline, kind: str = "low") -> int:
    """A queue's visible backlog, read directly (not through the metered dispatcher)."""
    attributes = p.env.clients.sqs.get_queue_attributes(
        QueueUrl=p.env.settings.queue_url(kind), AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def _fill_low_to(p: Pipeline, depth: int, kind: str = "low") -> None:
    """Send filler messages until the queue has ``depth`` visible messages."""
    for i in range(depth - _backlog(p, kind)):
        p.env.clients.sqs.send_message(
            QueueUrl=p.env.settings.queue_url(kind), MessageBody=json.dumps({"filler": i})
        )
    assert _backlog(p, kind) == depth


def _take_one_low(p: Pipeline) -> None:
    """A worker takes one visible message and deletes it."""
    url = p.env.settings.queue_url("low")
    [message] = p.env.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    p.env.clients.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def _tick(p: Pipeline, at):
    return p.dispatcher.dispatch_shard(0, at)


def _run(p: Pipeline, job, minute: int):
    return p.dispatcher.runs.find(make_run_id(job.id, T0 + timedelta(minutes=minute)))


def test_a_deep_low_queue_holds_back_due_low_jobs_untouched_and_only_them(aws, caplog):
    # Given two low jobs, a default and a high one, every minute (12:00 and 12:01 dispatched at create)
    p = _pipeline(aws)
    lows = [_job(p, "low-a", "low"), _job(p, "low-b", "low")]
    others = [_job(p, "default", "default"), _job(p, "high", "high")]
    # and the low queue's visible backlog exactly at the limit
    _fill_low_to(p, LIMIT)
    stored_lows = [p.dispatcher.jobs.get("acme", j.id) for j in lows]
    low_messages = len(p.messages("low"))
    # When the shard ticks at 12:02
    with caplog.at_level(logging.INFO, logger="jobsched.services.backpressure"):
        summary = _tick(p, T0 + timedelta(minutes=2))
    # Then the low jobs are held back: not advanced, no run, no message; the queue was read once
    assert summary.jobs_held_back == 2 and p.meter.requests[READS] == 1
    assert [p.dispatcher.jobs.get("acme", j.id) for j in lows] == stored_lows
    assert all(_run(p, j, 2) is None for j in lows)
    assert len(p.messages("low")) == low_messages
    # and the default and high jobs dispatched as usual
    assert summary.jobs_advanced == 2 and summary.runs_created == 4
    assert all(_run(p, j, m).state is RunState.QUEUED for j in others for m in (2, 3))
    # and the tick logged the hold once
    held = [r for r in caplog.records if "held back" in r.getMessage()]
    assert len(held) == 1 and "2 due low job(s)" in held[0].getMessage()


def test_held_jobs_dispatch_once_the_backlog_drains_and_late_ones_follow_the_misfire_policy(aws):
    # Given a low job (misfire run_once, grace 60 s) held back by the ticks at 12:02, 12:03 and 12:04
    p = _pipeline(aws)
    job = _job(p, "low", "low", misfire_policy="run_once")
    _fill_low_to(p, LIMIT)
    for minute in (2, 3, 4):
        assert _tick(p, T0 + timedelta(minutes=minute)).jobs_held_back == 1
    assert _run(p, job, 2) is None
    # When a worker takes one message (backlog one below the limit) and the shard ticks at 12:05:30
    _take_one_low(p)
    assert _backlog(p) == LIMIT - 1
    summary = _tick(p, T0 + timedelta(minutes=5, seconds=30))
    # Then the job dispatches: 12:02 and 12:03 (late beyond the grace) are skipped as misfires,
    # 12:04 (the latest missed one) fires now as a catch-up, 12:05 on time, 12:06 ahead
    assert summary.jobs_held_back == 0 and summary.jobs_advanced == 1
    assert [_run(p, job, m).skip_reason for m in (2, 3)] == ["misfire", "misfire"]
    assert [_run(p, job, m).state for m in (4, 5, 6)] == [RunState.QUEUED] * 3
    assert _run(p, job, 4).trigger is Trigger.CATCHUP and _run(p, job, 5).trigger is Trigger.SCHEDULE
    # and each of the four ticks read the queue once
    assert p.meter.requests[READS] == 4


def test_a_tick_without_a_due_low_job_does_not_read_the_queue(aws):
    # Given a deep low queue, a due default job and a low job not due before 13:00
    p = _pipeline(aws)
    default = _job(p, "default", "default")
    _job(p, "hourly", "low", schedule="0 * * * *")
    _fill_low_to(p, LIMIT + 3)
    # When the shard ticks at 12:02
    summary = _tick(p, T0 + timedelta(minutes=2))
    # Then nothing is held back, the default job dispatched, and the queue was never read
    assert summary.jobs_held_back == 0 and _run(p, default, 2).state is RunState.QUEUED
    assert p.meter.requests[READS] == 0


def test_a_default_job_is_held_back_only_with_a_limit_of_its_own(aws):
    # Given depth limits on low (5) and default (3), a due default job and a due low job, and a
    # default queue 3 deep while the low queue is empty
    settings = replace(
        aws.settings,
        shards=1,
        backpressure={"low": QueueLimit(depth=LIMIT), "default": QueueLimit(depth=3)},
    )
    p = build_pipeline(AwsEnv(settings=settings, clients=aws.clients))
    default, low = _job(p, "default", "default"), _job(p, "low", "low")
    _fill_low_to(p, 3, kind="default")
    # When the shard ticks at 12:02
    summary = _tick(p, T0 + timedelta(minutes=2))
    # Then the default job is held back (its queue is at its limit), the low one dispatched, and each
    # queue was read once
    assert summary.jobs_held_back == 1 and _run(p, default, 2) is None
    assert _run(p, low, 2).state is RunState.QUEUED
    assert p.meter.requests[READS] == 2


def test_high_is_never_held_back_even_when_a_limit_names_it(aws):
    # Given limits that name high (settings refuse it; the service ignores it all the same)
    p = _pipeline(aws)
    limits = {"high": QueueLimit(depth=1), "low": QueueLimit(depth=LIMIT)}
    p.dispatcher.backpressure = Backpressure(
        RunQueues(p.env.clients.sqs, p.env.settings.queue_urls, p.meter), limits
    )
    job = _job(p, "high", "high")
    _fill_low_to(p, 5, kind="high")
    # When the shard ticks at 12:02
    summary = _tick(p, T0 + timedelta(minutes=2))
    # Then the high job dispatched and the high queue was never read
    assert summary.jobs_held_back == 0 and _run(p, job, 2).state is RunState.QUEUED
    assert p.meter.requests[READS] == 0


def test_limit_zero_never_reads_the_queue_and_never_holds_back(aws):
    # Given backpressure off (limit 0), a due low job and a deep low queue
    p = _pipeline(aws, limit=0)
    job = _job(p, "low", "low")
    _fill_low_to(p, 50)
    # When the shard ticks at 12:02
    summary = _tick(p, T0 + timedelta(minutes=2))
    # Then the low job dispatched and the queue was never read
    assert summary.jobs_held_back == 0 and summary.jobs_advanced == 1
    assert _run(p, job, 2).state is RunState.QUEUED
    assert p.meter.requests[READS] == 0


def test_an_unreadable_backlog_does_not_stop_dispatch(aws, caplog):
    # Given a dispatcher whose backlog read fails (the queue it asks about does not exist)
    p = _pipeline(aws)
    job = _job(p, "low", "low")
    _fill_low_to(p, LIMIT)
    missing = p.env.settings.queue_url("low") + "-missing"
    limits = {"low": QueueLimit(depth=LIMIT)}
    p.dispatcher.backpressure = Backpressure(RunQueues(p.env.clients.sqs, {"low": missing}, p.meter), limits)
    # When the shard ticks at 12:02
    with caplog.at_level(logging.WARNING, logger="jobsched.services.backpressure"):
        summary = _tick(p, T0 + timedelta(minutes=2))
    # Then the failure is logged and the low job dispatched as if there were no backpressure
    assert any("backlog unreadable" in r.getMessage() for r in caplog.records)
    assert summary.jobs_held_back == 0 and _run(p, job, 2).state is RunState.QUEUED
    assert p.meter.requests[READS] == 1


def test_creating_a_due_low_job_dispatches_it_at_once_despite_the_backlog(aws):
    # Given a deep low queue / When a low job due now is created through the job service
    p = _pipeline(aws)
    _fill_low_to(p, LIMIT + 1)
    job = _job(p, "low", "low")
    # Then its first runs are queued at once (the API's immediate dispatch does not check the queue)
    assert [_run(p, job, m).state for m in (0, 1)] == [RunState.QUEUED] * 2
    assert p.meter.requests[READS] == 0


def test_a_deep_low_queue_never_holds_back_low_jobs_of_the_long_or_container_pool(aws):
    # Given a low lambda job, and low jobs on the long and the container pool, every minute
    p = _pipeline(aws)
    held = _job(p, "low-lambda", "low")
    pooled = [_job(p, "low-long", "low", pool="long"), _job(p, "low-container", "low", pool="container")]
    # and the low queue's visible backlog at the limit
    _fill_low_to(p, LIMIT)
    # When the shard ticks at 12:02
    summary = _tick(p, T0 + timedelta(minutes=2))
    # Then only the lambda job is held back (backpressure watches the Lambda priority queues); the
    # others' 12:02 runs are made and sent to their pools' queues
    assert summary.jobs_held_back == 1
    assert _run(p, held, 2) is None
    for job, kind in zip(pooled, ("long", "container"), strict=True):
        run = _run(p, job, 2)
        assert run is not None and run.pool == kind
        assert any(m["body"]["run_id"] == run.id for m in p.messages(kind))
