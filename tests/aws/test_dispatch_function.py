"""The dispatcher Lambda entry point: event in, summary out, against moto."""

from __future__ import annotations

import pytest

import functions.dispatcher as fn
from jobsched.core.clock import FakeClock
from jobsched.core.errors import ValidationError
from jobsched.core.ids import shard_for
from tests.aws.conftest import T0, build_pipeline


class _Context:
    function_name = "dispatcher"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:dispatcher"
    aws_request_id = "req-1"


@pytest.fixture
def dispatcher_fn(aws_environ, monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "jobsched")
    clock = FakeClock(T0)
    with fn.seam.installed(clock=clock):
        yield clock


def test_event_with_a_shard_ticks_that_shard_and_returns_the_summary(aws_environ, dispatcher_fn, capsys):
    # Given a job every minute, created at T0 (its first two runs dispatched at once)
    job = build_pipeline(aws_environ).jobs.create(
        "acme", {"name": "m", "schedule": "* * * * *", "target": {"handler": "echo"}}, T0
    )
    dispatcher_fn.advance(minutes=2)
    # When the function runs for the job's shard
    result = fn.handler({"shard": shard_for(job.id, 4), "shards": 4}, _Context())
    # Then the summary counts the new runs and the EMF output carries the metrics without dimensions
    assert (
        result["shards"] == [shard_for(job.id, 4)]
        and result["runs_created"] == 2
        and result["jobs_advanced"] == 1
    )
    out = capsys.readouterr().out
    assert '"RunsSkipped"' in out and '"RunsDispatched"' in out and "tenant" not in out.split('"_aws"')[-1]


def test_event_without_a_shard_ticks_every_shard(aws_environ, dispatcher_fn):
    result = fn.handler({}, _Context())
    assert result["shards"] == list(range(aws_environ.settings.shards))


def test_a_bad_shard_is_a_validation_error():
    with pytest.raises(ValidationError, match="shard must be an integer"):
        fn.parse_shards({"shard": 99}, 4)


def test_the_event_names_the_shard_count_and_overrides_the_environment():
    # Given a function configured for 4 shards / When a tick of shard 5 of 8 arrives (a deployment
    # raising the count: the new schedule fires before the function's environment is updated)
    # Then it is shard 5 of 8, not an error; an event without "shards" uses the environment's count
    assert fn.parse_shards({"shard": 5, "shards": 8}, 4) == ([5], 8)
    assert fn.parse_shards({"shard": 1}, 4) == ([1], 4)
    assert fn.parse_shards({"shards": 2}, 4) == ([0, 1], 2)
    with pytest.raises(ValidationError, match=r"1\.\.32"):
        fn.parse_shards({"shard": 0, "shards": 64}, 4)


def test_a_tick_of_a_changed_count_reads_the_partitions_of_that_count(aws_environ, dispatcher_fn):
    result = fn.handler({"shard": 1, "shards": 8}, _Context())
    assert result["shards"] == [1] and result["partitions"] == [1, 9, 17, 25]


def test_missing_environment_names_the_variable(aws_environ, monkeypatch):
    from jobsched.runtime.settings import ConfigurationError

    monkeypatch.delenv("JOBSCHED_JOBS_TABLE", raising=False)
    with fn.seam.installed(), pytest.raises(ConfigurationError, match="JOBSCHED_JOBS_TABLE"):
        fn.handler({"shard": 0}, _Context())


def test_held_back_low_jobs_are_counted_in_the_summary_and_the_metric(
    aws_environ, dispatcher_fn, monkeypatch, capsys
):
    import json

    from jobsched.runtime import resources as r

    # Given a low job every minute and a low queue with 2 visible messages, limit 2
    monkeypatch.setenv(r.ENV_BACKPRESSURE_DEPTH_PREFIX + "LOW", "2")
    job = build_pipeline(aws_environ).jobs.create(
        "acme", {"name": "m", "schedule": "* * * * *", "target": {"handler": "echo"}, "priority": "low"}, T0
    )
    url = aws_environ.settings.queue_url("low")
    aws_environ.clients.sqs.send_message(QueueUrl=url, MessageBody="filler")  # + the 12:00 run's message
    dispatcher_fn.advance(minutes=2)
    capsys.readouterr()
    # When the function runs for the job's shard
    result = fn.handler({"shard": shard_for(job.id, 4), "shards": 4}, _Context())
    # Then the summary and the JobsHeldBack metric (service dimension only) count the held job
    assert result["jobs_held_back"] == 1 and result["jobs_advanced"] == 0
    [emf] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert emf["JobsHeldBack"] == [1.0]
    assert emf["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]


def test_a_tick_adds_each_tenant_it_served_its_share_once(aws_environ, dispatcher_fn):
    """Given two acme jobs and one globex job every minute (decision 0059),
    When one dispatcher invocation ticks every shard two minutes later,
    Then one usage item per tenant holds the tick's requests for it and its share of the invocation:
    the tenants' Lambda requests add up to the one invocation, acme's share (two jobs, their runs) is
    larger than globex's, and no run is counted as started (the dispatcher starts none)."""
    from jobsched.aws.metering import dynamo_for
    from jobsched.aws.usage_store import UsageStore

    pipeline = build_pipeline(aws_environ)
    for tenant in ("acme", "acme", "globex"):
        pipeline.jobs.create(
            tenant, {"name": "m", "schedule": "* * * * *", "target": {"handler": "echo"}}, T0
        )
    dispatcher_fn.advance(minutes=2)

    result = fn.handler({}, _Context())

    assert result["runs_created"] == 6
    store = UsageStore(
        dynamo_for(aws_environ.settings, aws_environ.clients.dynamodb), aws_environ.settings.leases_table
    )
    days = {u.tenant: u for u in store.all_days(T0.date(), T0.date())}
    assert set(days) == {"acme", "globex"}
    assert sum(u.lambda_requests for u in days.values()) == pytest.approx(1.0)
    assert days["acme"].lambda_requests > days["globex"].lambda_requests > 0
    assert days["acme"].wru > days["globex"].wru > 1  # its runs, job advances, and the usage write
    assert all(u.lambda_gb_seconds > 0 and u.sqs_requests > 0 and u.runs_started == 0 for u in days.values())
