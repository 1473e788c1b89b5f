"""The benchmark's own bookkeeping: execution evidence, lost-run classification, per-function tallies."""

from __future__ import annotations

import pytest
from moto import mock_aws

from jobsched.aws.clients import Clients
from jobsched.aws.metering import Meter
from jobsched.bench.evidence import ApiCalls, Executions, Tally, unsuccessful
from jobsched.bench.lag import percentile


def test_a_second_execution_of_a_run_is_a_duplicate():
    # Given run a executed twice (a redelivery) and run b once
    executions = Executions()
    for run_id, attempt in [("a", 1), ("b", 1), ("a", 1)]:
        executions.record(run_id, attempt)
    # When duplicates are counted / Then only the extra execution of a counts
    assert executions.duplicates() == 1


@pytest.mark.parametrize(
    ("state", "executions", "verdict"),
    [
        ("succeeded", 1, None),
        ("succeeded", 0, "not executed"),
        ("queued", 0, "queued"),
        ("failed", 3, "failed"),
        (None, 0, "missing"),
    ],
)
def test_an_expected_run_counts_as_lost_unless_it_succeeded_and_ran(state, executions, verdict):
    # Given one expected occurrence with a stored state (or none) and a number of executions
    states = {"j.1": state} if state else {}
    # When classified
    result = unsuccessful(["j.1"], states, {"j.1": executions})
    # Then it is lost with the expected reason, or not lost at all
    assert result.get("j.1") == verdict


def test_tally_attributes_what_the_meter_recorded_during_an_invocation_to_that_function():
    # Given a meter with earlier traffic, and a tally
    meter = Meter()
    meter.record_dynamodb("PutItem", wcu=5)
    tally = Tally()
    # When one dispatcher invocation records a put and a query
    with tally.invocation("dispatcher", meter):
        meter.record_dynamodb("PutItem", wcu=2)
        meter.record_dynamodb("Query", rcu=0.5)
        meter.record_sqs("SendMessageBatch", [1024] * 10)
    # Then only those are the dispatcher's, per operation
    use = tally.functions["dispatcher"]
    assert use.invocations == 1
    assert use.operations["dynamodb.PutItem"].wru == 2
    assert use.operations["dynamodb.Query"].rru == 0.5
    assert use.sqs_billed_requests == 1
    assert tally.totals() == (2, 0.5, 1)


def test_work_that_is_not_a_lambda_invocation_counts_requests_but_no_invocation():
    # Given a tally / When the event source mapping's delete is recorded outside a Lambda invocation
    meter, tally = Meter(), Tally()
    with tally.invocation("event_source_mapping", meter, lambda_invocation=False):
        meter.record_sqs("DeleteMessageBatch", [])
    # Then it is a billed request, but neither an invocation nor handler time
    use = tally.functions["event_source_mapping"]
    assert (use.invocations, use.durations, use.sqs_billed_requests) == (0, [], 1)


def test_api_calls_reveal_a_call_the_meter_did_not_record(monkeypatch):
    # Given moto, the raw call counter active, and a function that makes one unmetered call
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws(), ApiCalls().active() as calls:
        sqs = Clients(region_name="us-east-1").sqs
        url = sqs.create_queue(QueueName="q")["QueueUrl"]  # setup: not counted
        calls.current = "worker"
        sqs.send_message(QueueUrl=url, MessageBody="x")
        calls.current = None
    # When compared with a tally in which the worker metered nothing
    unmetered = calls.unmetered(Tally())
    # Then the raw send shows up as unmetered, and the setup call does not
    assert unmetered == {"worker": {"sqs.SendMessage": 1}}


@pytest.mark.parametrize(
    ("values", "pct", "expected"),
    [
        ([], 50, None),
        ([3.0], 99, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
        ([float(i) for i in range(1, 101)], 99, 99.0),
        ([float(i) for i in range(1, 101)], 100, 100.0),
        ([5.0, 1.0, 3.0], 50, 3.0),
    ],
)
def test_percentiles_are_nearest_rank(values, pct, expected):
    # Given lags / When a percentile is taken / Then it is the nearest-rank value
    assert percentile(values, pct) == expected
