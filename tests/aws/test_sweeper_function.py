"""The sweeper's Lambda entry point: one sweep, a summary."""

from __future__ import annotations

from datetime import timedelta

import pytest

import functions.sweeper as sweeper_function
from jobsched.aws.jobs_store import JobsStore
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
