"""Deadlines on the in-memory fakes (decision 0058): the sweeper reports a scheduled run that had not
succeeded by its ``deadline_at`` once — one notification to the job's notify (SNS), one
``RunsMissedDeadline`` point, ``deadline_missed_at`` on the run — and an occurrence the dispatcher
never made a run for the same way, once for both."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from jobsched.compose.pipeline import notify_policy_from_settings, sweeper_from_settings
from jobsched.core.models import Trigger, make_run_id, to_iso
from jobsched.core.run_records import new_run
from jobsched.runtime import observability as obs
from tests.aws.conftest import T0, AwsEnv, Pipeline
from tests.aws.memory import build_pipeline, memory_aws  # noqa: F401  (on the in-memory fakes)
from tests.services import test_notifications as receivers

topic = receivers.topic  # an SNS topic an SQS queue is subscribed to: what is published lands there
hook = receivers.hook  # a loopback webhook answering as told

FIVE_MINUTES = {"schedule": "*/5 * * * *", "target": {"handler": "echo"}}


@pytest.fixture
def p(aws) -> Pipeline:
    """One shard; runs made one look-ahead (60 s) ahead; the team's topics allowed."""
    settings = replace(
        aws.settings,
        shards=1,
        enqueue_horizon_seconds=60,
        notify_topic_arns=("arn:aws:sns:us-east-1:123456789012:team-*",),
        allowed_http_hosts=("127.0.0.1",),
    )
    pipeline = build_pipeline(AwsEnv(settings=settings, clients=aws.clients))
    pipeline.jobs.notify_policy = notify_policy_from_settings(settings)  # as the API's wiring gives it
    return pipeline


def _job(p: Pipeline, arn: str, **spec):
    body = FIVE_MINUTES | {"name": "nightly", "deadline_seconds": 120, "notify": {"sns_topic_arn": arn}}
    return p.jobs.create("acme", body | spec, T0)


def _sweep(p: Pipeline, minutes: float) -> tuple[obs.RecordingSink, dict]:
    sink = obs.RecordingSink()
    summary = sweeper_from_settings(p.env.settings, p.env.clients, metrics=sink).sweep(
        T0 + timedelta(minutes=minutes)
    )
    return sink, summary.to_dict()


def _run_item(p: Pipeline, run_id: str) -> dict:
    return p.dispatcher.runs.find(run_id).to_item()


def _finish(p: Pipeline, run_id: str, state: str, minutes: float) -> None:
    """The run ended ``state`` at 12:00 + ``minutes`` (as a worker's last write leaves it)."""
    job_id, run_key = run_id.split(".", 1)
    p.env.clients.dynamodb.update_item(
        TableName=p.env.settings.runs_table,
        Key={"job_id": {"S": job_id}, "run_key": {"S": run_key}},
        UpdateExpression="SET #s = :s, finished_at = :f",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":s": {"S": state}, ":f": {"S": to_iso(T0 + timedelta(minutes=minutes))}},
    )


def test_a_scheduled_run_carries_its_deadline_and_a_manual_one_none(p, topic):
    # Given a five-minute job with a two-minute deadline, created at 12:00 (its 12:00 run made at once)
    job = _job(p, topic[0])
    # Then its 12:00 run must succeed by 12:02
    run = p.dispatcher.runs.find(make_run_id(job.id, T0))
    assert run.deadline_at == T0 + timedelta(minutes=2) and run.deadline_missed_at is None
    # And a run made by hand, or a backfill's, has none
    assert new_run(job, T0, Trigger.MANUAL, T0, nonce="n1").deadline_at is None
    assert new_run(job, T0, Trigger.BACKFILL, T0).deadline_at is None


def test_a_run_still_queued_past_its_deadline_is_reported_once(p, topic):
    # Given the 12:00 run of a job with a two-minute deadline that no worker took
    arn, published = topic
    job = _job(p, arn)
    run_id = make_run_id(job.id, T0)
    # When the sweeper sweeps at 12:03 (the next occurrence, 12:05, is not due yet)
    sink, summary = _sweep(p, minutes=3)
    # Then one notification names the run, its deadline and its state; one metric point; the run shows it
    [note] = published()
    assert note["type"] == "deadline_missed" and note["run_id"] == run_id
    assert note["deadline_at"] == to_iso(T0 + timedelta(minutes=2)) and note["state"] == "queued"
    assert sink.count(obs.RUNS_MISSED_DEADLINE) == 1 and summary["deadlines_missed"] == 1
    assert _run_item(p, run_id)["deadline_missed_at"] == to_iso(T0 + timedelta(minutes=3))
    # When the sweeper sweeps again at 12:04, the run still queued
    sink, summary = _sweep(p, minutes=4)
    # Then nothing is told or counted again
    assert published() == [] and sink.count(obs.RUNS_MISSED_DEADLINE) == 0


def test_a_run_that_succeeded_in_time_is_not_reported(p, topic):
    # Given the 12:00 run succeeded at 12:01, inside its two-minute deadline
    arn, published = topic
    job = _job(p, arn)
    _finish(p, make_run_id(job.id, T0), "succeeded", 1)
    # When the sweeper sweeps at 12:04
    sink, _ = _sweep(p, minutes=4)
    # Then nothing is reported
    assert published() == [] and sink.count(obs.RUNS_MISSED_DEADLINE) == 0
    assert "deadline_missed_at" not in _run_item(p, make_run_id(job.id, T0))


def test_a_run_that_succeeded_late_is_reported_when_the_sweeper_reads_it(p, topic):
    # Given the 12:00 run succeeded at 12:03, a minute after its deadline, before any sweep saw it
    arn, published = topic
    job = _job(p, arn)
    run_id = make_run_id(job.id, T0)
    _finish(p, run_id, "succeeded", 3)
    # When the sweeper sweeps at 12:04
    sink, _ = _sweep(p, minutes=4)
    # Then it is reported as having missed its deadline, with the state it ended in
    [note] = published()
    assert note["run_id"] == run_id and note["state"] == "succeeded"
    assert sink.count(obs.RUNS_MISSED_DEADLINE) == 1


def test_a_job_without_a_deadline_is_never_reported(p, topic):
    # Given a job with no deadline whose 12:00 run nobody took
    arn, published = topic
    job = _job(p, arn, deadline_seconds=0)
    assert p.dispatcher.runs.find(make_run_id(job.id, T0)).deadline_at is None
    # When the sweeper sweeps at 12:30, long after, no dispatcher having ticked
    sink, _ = _sweep(p, minutes=30)
    # Then nothing is reported
    assert published() == [] and sink.count(obs.RUNS_MISSED_DEADLINE) == 0


def test_an_occurrence_no_run_was_made_for_is_reported_once_and_its_late_run_not_again(p, topic):
    # Given the job's 12:00 run succeeded in time, and no dispatcher ticked after 12:00 (it was down):
    # the 12:05 occurrence has no run
    arn, published = topic
    job = _job(p, arn)
    _finish(p, make_run_id(job.id, T0), "succeeded", 1)
    # When the sweeper sweeps at 12:08 (12:05 + the two-minute deadline has passed)
    sink, summary = _sweep(p, minutes=8)
    # Then the 12:05 occurrence is reported, with no run state: no run was made
    [note] = published()
    assert note["run_id"] == make_run_id(job.id, T0 + timedelta(minutes=5)) and note["state"] is None
    assert "dispatch is behind" in note["reason"]
    assert summary["occurrences_missed"] == 1 and sink.count(obs.RUNS_MISSED_DEADLINE) == 1
    # When a second sweep at 12:09 still finds it overdue
    sink, _ = _sweep(p, minutes=9)
    # Then it is not reported again
    assert published() == [] and sink.count(obs.RUNS_MISSED_DEADLINE) == 0
    # When the dispatcher comes back at 12:09:30 and makes the late 12:05 run, and the sweeper sweeps
    p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=9, seconds=30))
    late = make_run_id(job.id, T0 + timedelta(minutes=5))
    sink, _ = _sweep(p, minutes=13)
    # Then the late run shows the miss, but nobody is told a second time
    assert _run_item(p, late)["deadline_missed_at"] == to_iso(T0 + timedelta(minutes=8))
    notes = published()
    assert [n["run_id"] for n in notes if n["run_id"] == late] == []


def test_a_workflow_run_not_succeeded_by_its_deadline_is_reported_once(p, topic):
    # Given a workflow (stored as a job) with a two-minute deadline whose 12:00 run nobody advanced
    arn, published = topic
    nodes = {"nodes": [{"id": "a", "target": {"handler": "echo"}}]}
    workflow = p.jobs.create(
        "acme",
        {
            "name": "etl",
            "schedule": "*/5 * * * *",
            "target": {"workflow": nodes},
            "deadline_seconds": 120,
            "notify": {"sns_topic_arn": arn},
        },
        T0,
    )
    run_id = make_run_id(workflow.id, T0)
    assert p.dispatcher.runs.find(run_id).deadline_at == T0 + timedelta(minutes=2)
    # When the sweeper sweeps at 12:03
    sink, _ = _sweep(p, minutes=3)
    # Then the workflow run is reported once
    [note] = published()
    assert note["run_id"] == run_id and note["job_id"] == workflow.id
    assert sink.count(obs.RUNS_MISSED_DEADLINE) == 1


def test_a_failed_delivery_is_retried_next_sweep_and_the_run_shows_the_miss_once_told(p, hook):
    # Given a job telling a webhook that answers 503 once, then 200; its 12:00 run nobody took
    url, receiver = hook
    receiver.answers = [503]
    job = p.jobs.create(
        "acme", FIVE_MINUTES | {"name": "n", "deadline_seconds": 120, "notify": {"webhook": url}}, T0
    )
    run_id = make_run_id(job.id, T0)
    # When the sweeper sweeps at 12:03: the try fails
    sink, _ = _sweep(p, minutes=3)
    # Then the miss is counted once, but the run does not show it yet: nobody was told
    assert sink.count(obs.RUNS_MISSED_DEADLINE) == 1 and len(receiver.seen) == 1
    assert "deadline_missed_at" not in _run_item(p, run_id)
    # When the next sweep at 12:04 tries again and the webhook answers 200
    sink, _ = _sweep(p, minutes=4)
    # Then the same notification (same id) arrived, it was not counted again, and the run shows the miss
    assert [body["id"] for _, body in receiver.seen] == [f"{run_id}@deadline"] * 2
    assert sink.count(obs.RUNS_MISSED_DEADLINE) == 0
    assert _run_item(p, run_id)["deadline_missed_at"] == to_iso(T0 + timedelta(minutes=3))
    # And a third sweep sends nothing more
    _sweep(p, minutes=5)
    assert len(receiver.seen) == 2


def test_a_run_that_expired_meanwhile_is_not_written_back(p, topic):
    # Given the 12:00 run past its deadline, read by the sweeper, then removed (its TTL) before the stamp
    arn, published = topic
    job = _job(p, arn)
    run_id = make_run_id(job.id, T0)
    item = _run_item(p, run_id)
    job_id, run_key = run_id.split(".", 1)
    p.env.clients.dynamodb.delete_item(
        TableName=p.env.settings.runs_table, Key={"job_id": {"S": job_id}, "run_key": {"S": run_key}}
    )
    watch = sweeper_from_settings(p.env.settings, p.env.clients).deadlines
    # When the watch judges the item it read
    owed = watch.check_run(item, T0 + timedelta(minutes=3), lambda tenant, job_id: job)
    # Then the miss is told, and no run item is made again from the stamp
    assert owed is False and len(published()) == 1
    assert p.dispatcher.runs.find(run_id) is None


def test_the_sweepers_grace_follows_the_setting_the_embedded_mode_may_shorten(p, topic):
    # Given the 12:00 run of a job with a 10 s deadline that no worker took
    arn, published = topic
    job = _job(p, arn, deadline_seconds=10)
    run_id = make_run_id(job.id, T0)
    # When a sweeper with AWS's grace (2 minutes) sweeps at 12:00:20
    _, summary = _sweep(p, minutes=20 / 60)
    # Then it has not read the run yet: nothing is reported
    assert published() == [] and summary["deadlines_missed"] == 0
    # When one given a 15 s grace (JOBSCHED_SWEEPER_GRACE_SECONDS, jobsched dev --sweeper-grace-seconds)
    # sweeps at 12:00:14, then at 12:00:16
    p.env = AwsEnv(settings=replace(p.env.settings, sweeper_grace_seconds=15), clients=p.env.clients)
    _, early = _sweep(p, minutes=14 / 60)
    _, summary = _sweep(p, minutes=16 / 60)
    # Then the run is read and reported once the grace has passed, not before
    assert early["deadlines_missed"] == 0 and summary["deadlines_missed"] == 1
    # (and the check of occurrences no run was made for waits the same grace)
    sweeper = sweeper_from_settings(p.env.settings, p.env.clients)
    assert sweeper.grace == sweeper.deadlines.config.grace == timedelta(seconds=15)
    [note] = published()
    assert note["run_id"] == run_id and note["deadline_at"] == to_iso(T0 + timedelta(seconds=10))
