"""The sweeper's ``OldestQueuedRunAge<Priority>`` metrics (on the in-memory fakes): what the
``OldestRun-<priority>`` alarms watch instead of SQS's ``ApproximateAgeOfOldestMessage``, which also
counts the time a message sent ahead with ``DelaySeconds`` waits for its due instant
(docs/decisions/0040)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from jobsched.aws.attempts import AttemptStore
from jobsched.compose.pipeline import sweeper_from_settings
from jobsched.runtime import observability as obs
from jobsched.runtime.resources import PRIORITIES
from tests.aws.conftest import T0, AwsEnv, Pipeline, build_pipeline
from tests.aws.memory import memory_aws, memory_pipeline  # noqa: F401  (this file runs on the in-memory fakes)
from tests.services.test_backpressure_age import _job, _run

AGES = {p: obs.oldest_queued_run_age(p) for p in PRIORITIES}


def _pipeline(aws: AwsEnv, horizon_seconds: int) -> Pipeline:
    settings = replace(aws.settings, shards=1, enqueue_horizon_seconds=horizon_seconds)
    return build_pipeline(AwsEnv(settings=settings, clients=aws.clients))


def _sweep(p: Pipeline, minutes: float) -> dict[str, list[float]]:
    sink = obs.RecordingSink()
    sweeper_from_settings(p.env.settings, p.env.clients, metrics=sink).sweep(T0 + timedelta(minutes=minutes))
    return {p: sink.points[name] for p, name in AGES.items()}


def _claim(p: Pipeline, run, seconds: float = 1) -> None:
    """A worker claims the run (running, its message in flight) ``seconds`` after 12:00."""
    attempts = AttemptStore(p.dispatcher.runs.dynamo, p.env.settings.runs_table)
    attempts.claim(run.id, 1, "worker:test", T0 + timedelta(seconds=seconds), 900)


def test_runs_queued_ahead_of_their_due_instant_count_for_nothing(aws):
    # Given a five-minute job of every priority created at 12:00 with runs queued 15 minutes ahead:
    # the 12:00 run is taken by a worker, the 12:05, 12:10 and 12:15 runs' messages wait in their
    # queue with DelaySeconds 300, 600, 900 (SQS counts them in its age of the oldest message)
    p = _pipeline(aws, horizon_seconds=900)
    for priority in PRIORITIES:
        job = _job(p, priority, priority, schedule="*/5 * * * *")
        _claim(p, _run(p, job, 0))
    delayed = p.env.clients.sqs.get_queue_attributes(
        QueueUrl=p.env.settings.queue_url("high"), AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]["ApproximateNumberOfMessagesDelayed"]
    assert int(delayed) == 3
    # When the sweeper sweeps at 12:04:30, those messages four and a half minutes in their queues
    ages = _sweep(p, minutes=4.5)
    # Then every priority's oldest queued run has waited 0 s: nothing is late
    assert ages == {priority: [0.0] for priority in PRIORITIES}


def test_a_due_run_nobody_took_counts_from_its_due_instant(aws):
    # Given a high and a low job whose 12:00 runs were queued and never taken by a worker
    p = _pipeline(aws, horizon_seconds=60)
    _job(p, "high", "high")
    _job(p, "low", "low")
    # When the sweeper sweeps at 12:07
    ages = _sweep(p, minutes=7)
    # Then the high and low ages are 7 minutes (the 12:00 runs), default's is 0 (no default job)
    assert ages == {"high": [420.0], "default": [0.0], "low": [420.0]}


def test_a_running_run_is_not_waiting(aws):
    # Given the high job's 12:00 run claimed by a worker (running, its message in flight)
    p = _pipeline(aws, horizon_seconds=60)
    job = _job(p, "high", "high")
    _claim(p, _run(p, job, 0))
    # When the sweeper sweeps at 12:03 (within the lease) / Then the high job's 12:01 run, still
    # queued, is the oldest: 2 minutes
    ages = _sweep(p, minutes=3)
    assert ages["high"] == [120.0]


def test_a_waiting_run_of_the_long_or_container_pool_ages_no_lambda_priority(aws):
    # Given low jobs on the long and the container pool whose 12:00 runs were never taken (a container
    # pool scaling from zero), and no job on the lambda pool
    p = _pipeline(aws, horizon_seconds=60)
    _job(p, "long", "low", pool="long")
    _job(p, "container", "low", pool="container")
    # When the sweeper sweeps at 12:07
    ages = _sweep(p, minutes=7)
    # Then no priority's oldest queued run has waited: backpressure by age and the OldestRun alarms
    # watch the Lambda priority queues only
    assert ages == {priority: [0.0] for priority in PRIORITIES}
