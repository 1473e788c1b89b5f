"""The sweeper's Lambda entry point: one sweep, a summary."""

from __future__ import annotations

from datetime import timedelta

import pytest

import functions.sweeper as sweeper_function
from jobsched.aws.jobs_store import JobsStore
from jobsched.compose.pipeline import queue_depths_from_settings
from jobsched.core.run_stats import minute_key, stats_range
from jobsched.local.invoke import LambdaContext
from tests.aws.conftest_worker import Kit
from tests.services.test_sweeper import make_job


@pytest.fixture
def kit(aws_environ, clock):
    with sweeper_function.seam.installed(clock=clock):
        yield Kit(aws_environ, clock)


def test_the_function_sweeps_and_returns_a_summary(kit, clock):
    # Given a run whose send was lost three minutes ago
    make_job(JobsStore(kit.dynamo, kit.aws.settings.jobs_table), clock)
    kit.new_run()
    clock.advance(timedelta(minutes=3))
    # When the scheduled sweeper runs
    summary = sweeper_function.handler({}, LambdaContext("sweeper", 300))
    # Then it reports the re-sent run
    assert summary["resent"] == 1 and summary["ledger_items"] == 1 and summary["runs_examined"] == 1


def test_each_sweep_samples_every_run_queues_depth_into_its_minute(kit, clock):
    # Given two messages ready in the default queue, one received (in flight) in it, and one sent
    # ahead with a delay to the low queue (decision 0064)
    sqs, urls = kit.aws.clients.sqs, kit.aws.settings.queue_urls
    for body in ("a", "b", "c"):
        sqs.send_message(QueueUrl=urls["default"], MessageBody=body, MessageGroupId="acme")
    sqs.receive_message(QueueUrl=urls["default"], MaxNumberOfMessages=1, VisibilityTimeout=300)
    sqs.send_message(QueueUrl=urls["low"], MessageBody="later", MessageGroupId="acme", DelaySeconds=600)
    # When the scheduled sweeper runs
    summary = sweeper_function.handler({}, LambdaContext("sweeper", 300))
    # Then every run queue was read, and one sample of this minute holds their counts
    assert summary["depths_sampled"] == len(urls) == 5
    span = stats_range(clock.now(), clock.now() + timedelta(minutes=1), "minute")
    depths = queue_depths_from_settings(kit.aws.settings, kit.aws.clients, kit.dynamo)
    [sample] = depths.samples(span)
    assert sample["minute"] == minute_key(clock.now())
    assert (sample["default_visible"], sample["default_in_flight"], sample["default_delayed"]) == (2, 1, 0)
    assert (sample["low_visible"], sample["low_in_flight"], sample["low_delayed"]) == (0, 0, 1)
    assert {sample[f"{q}_visible"] for q in ("high", "long", "container")} == {0}
