"""Backpressure by the age of the oldest queued run, on the in-memory fakes: the sweeper measures it
per priority (one Leases item, written only when it changes), a dispatcher tick holds back due jobs of
a priority whose oldest queued run has waited its ``age_seconds`` while its queue still has visible
messages."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta

from jobsched.aws.metering import Meter, dynamo_for
from jobsched.aws.queue_ages import KEY, QueueAges
from jobsched.compose.pipeline import sweeper_from_settings
from jobsched.core.backpressure import QueueLimit
from jobsched.core.models import RunState, make_run_id, to_iso
from tests.aws.conftest import T0, AwsEnv, Pipeline
from tests.aws.memory import build_pipeline, memory_aws  # noqa: F401  (on the in-memory fakes)

EVERY_MINUTE = {"schedule": "* * * * *", "target": {"handler": "echo"}}
AGE = 900  # 15 minutes
READS = "sqs.GetQueueAttributes"


def _pipeline(aws: AwsEnv, limits: dict[str, QueueLimit]) -> Pipeline:
    """One shard; runs enqueued one look-ahead (60 s) ahead, so a per-minute job is due every tick."""
    settings = replace(aws.settings, shards=1, backpressure=limits, enqueue_horizon_seconds=60)
    return build_pipeline(AwsEnv(settings=settings, clients=aws.clients))


def _job(p: Pipeline, name: str, priority: str, **spec):
    return p.jobs.create("acme", EVERY_MINUTE | {"name": name, "priority": priority} | spec, T0)


def _run(p: Pipeline, job, minute: int):
    return p.dispatcher.runs.find(make_run_id(job.id, T0 + timedelta(minutes=minute)))


def _ages_item(p: Pipeline) -> dict | None:
    from jobsched.aws.metering import deserialize

    item = p.env.clients.dynamodb.get_item(
        TableName=p.env.settings.leases_table, Key={"lease_key": {"S": KEY}}
    ).get("Item")
    return deserialize(item) if item else None


def _drain(p: Pipeline, kind: str) -> None:
    """Workers take every visible message of the queue (and delete it)."""
    url = p.env.settings.queue_url(kind)
    while messages := p.env.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        for m in messages:
            p.env.clients.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_the_sweeper_records_the_oldest_queued_run_per_priority(aws):
    # Given low runs queued at 12:00 and 12:01 (created with the job) that no worker took, a default
    # job's runs likewise, and a high job's (high is never measured: it is never held back)
    p = _pipeline(aws, {"low": QueueLimit(age_seconds=AGE)})
    _job(p, "low", "low")
    _job(p, "default", "default")
    _job(p, "high", "high")
    # When the sweeper sweeps at 12:20
    sweeper = sweeper_from_settings(p.env.settings, p.env.clients)
    sweeper.sweep(T0 + timedelta(minutes=20))
    # Then the ages item names the earliest due instant still queued of default and low only
    item = _ages_item(p)
    assert item["oldest_low"] == item["oldest_default"] == to_iso(T0)
    assert "oldest_high" not in item and item["measured_at"] == to_iso(T0 + timedelta(minutes=20))


def test_runs_waiting_for_a_limit_or_not_due_yet_are_not_counted(aws):
    # Given a low run queued at 12:00 that waits for a concurrency slot (its message is delayed on
    # purpose), and the low job's 12:01 run still queued
    p = _pipeline(aws, {"low": QueueLimit(age_seconds=AGE)})
    job = _job(p, "low", "low")
    table = p.env.settings.runs_table
    run = _run(p, job, 0)
    p.env.clients.dynamodb.update_item(
        TableName=table,
        Key={"job_id": {"S": run.job_id}, "run_key": {"S": run.run_key}},
        UpdateExpression="SET waiting_for = :w",
        ExpressionAttributeValues={":w": {"S": "concurrency:reports"}},
    )
    # When the sweeper sweeps at 12:05
    sweeper_from_settings(p.env.settings, p.env.clients).sweep(T0 + timedelta(minutes=5))
    # Then the oldest queued low run is the 12:01 one
    assert _ages_item(p)["oldest_low"] == to_iso(T0 + timedelta(minutes=1))


def test_the_ages_item_is_written_only_when_it_changes(aws):
    # Given the ages store of one sweeper process, metered
    meter = Meter()
    ages = QueueAges(dynamo_for(aws.settings, aws.clients.dynamodb, meter), aws.settings.leases_table)
    # When it records nothing old three times, then an old low run, then the same again
    writes = [ages.record({}, T0), ages.record({}, T0 + timedelta(minutes=5)), ages.record({}, T0)]
    writes += [ages.record({"low": T0}, T0 + timedelta(minutes=20))]
    writes += [ages.record({"low": T0}, T0 + timedelta(minutes=25))]
    # Then it wrote the first measurement and the change, nothing else
    assert writes == [True, False, False, True, False]
    assert meter.requests["dynamodb.PutItem"] == 2
    assert ages.read() == {"low": T0}


def test_an_old_backlog_holds_back_due_jobs_until_the_queue_drains(aws, caplog):
    # Given age limits of 15 min on low, low runs queued from 12:00 that no worker takes (the queue
    # is far below any depth limit), and a high job due every minute as well
    p = _pipeline(aws, {"low": QueueLimit(depth=1000, age_seconds=AGE)})
    low = _job(p, "low", "low", misfire_policy="run_once")
    high = _job(p, "high", "high")
    sweeper = sweeper_from_settings(p.env.settings, p.env.clients)
    # (ticks until 12:15 dispatch normally; the sweep at 12:16 finds the 12:00 run still queued)
    for minute in range(2, 16):
        assert p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=minute)).jobs_held_back == 0
    sweeper.sweep(T0 + timedelta(minutes=16))
    stored = p.dispatcher.jobs.get("acme", low.id)
    # When the shard ticks at 12:16
    with caplog.at_level(logging.INFO, logger="jobsched.services.backpressure"):
        summary = p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=16))
    # Then the low job is held back (the oldest queued low run has waited 16 min), untouched,
    # and the high job dispatched
    assert summary.jobs_held_back == 1 and _run(p, low, 17) is None
    assert p.dispatcher.jobs.get("acme", low.id) == stored
    assert _run(p, high, 17).state is RunState.QUEUED
    held = [r.getMessage() for r in caplog.records if "held back" in r.getMessage()]
    assert len(held) == 1 and "1 due low job(s) (age)" in held[0] and "waited 960 s" in held[0]
    # When workers drain the low queue and the shard ticks at 12:17, before any new sweep
    _drain(p, "low")
    summary = p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=17))
    # Then the depth read (0 visible) overrules the stale age and the low job dispatches
    assert summary.jobs_held_back == 0
    assert [_run(p, low, m).state for m in (17, 18)] == [RunState.QUEUED] * 2


def test_a_tick_reads_the_ages_once_and_only_for_a_priority_with_an_age_limit(aws, monkeypatch):
    # Given an age limit on low only, due low and default jobs and visible messages in both queues
    p = _pipeline(aws, {"low": QueueLimit(age_seconds=AGE), "default": QueueLimit(depth=1000)})
    _job(p, "low-a", "low")
    _job(p, "low-b", "low")
    _job(p, "default", "default")
    ages = p.dispatcher.backpressure.ages
    reads = []
    monkeypatch.setattr(ages, "read", lambda real=ages.read: reads.append(1) or real())
    # When the shard ticks at 12:01
    p.meter.requests.clear()
    p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=1))
    # Then each queue was read once, and the ages item once (for low's two jobs)
    assert p.meter.requests[READS] == 2
    assert len(reads) == 1


def test_unreadable_ages_dispatch_as_if_there_were_no_age(aws, caplog):
    # Given a dispatcher whose ages item cannot be read (its table does not exist)
    p = _pipeline(aws, {"low": QueueLimit(age_seconds=AGE)})
    _job(p, "low", "low")
    p.dispatcher.backpressure.ages = QueueAges(p.dispatcher.backpressure.ages.dynamo, "missing-table")
    # When the shard ticks at 12:30 (the 12:00 run long queued)
    with caplog.at_level(logging.WARNING, logger="jobsched.services.backpressure"):
        summary = p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=30))
    # Then the failure is logged and the job dispatched
    assert any("queue ages unreadable" in r.getMessage() for r in caplog.records)
    assert summary.jobs_held_back == 0 and summary.jobs_advanced == 1


def test_the_ages_are_not_read_when_the_depth_already_holds(aws, monkeypatch):
    # Given low limits of depth 1 and age 15 min, and a due low job whose 12:00 run is visible
    p = _pipeline(aws, {"low": QueueLimit(depth=1, age_seconds=AGE)})
    _job(p, "low", "low")
    ages = p.dispatcher.backpressure.ages
    reads = []
    monkeypatch.setattr(ages, "read", lambda real=ages.read: reads.append(1) or real())
    # When the shard ticks at 12:01
    summary = p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=1))
    # Then the job is held back by depth, and the ages item was never read
    assert summary.jobs_held_back == 1 and reads == []
