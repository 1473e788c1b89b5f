"""Reading many runs by key (the sweeper's reads): the same items as BatchGetItem, for fewer read units
when a job's runs lie next to each other (jobsched/aws/run_reads.py, docs/decisions/0035)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobsched.aws.metering import dynamo_for
from jobsched.aws.run_reads import read_runs
from jobsched.aws.sizing import Meter, item_size, serialize
from jobsched.core.models import Run, RunState, make_run_id
from jobsched.runtime import observability as obs
from tests.aws.conftest import T0
from tests.aws.memory import memory_aws_units  # noqa: F401  (on the in-memory fakes)


@pytest.fixture
def store(aws):
    meter = Meter()
    return dynamo_for(aws.settings, aws.clients.dynamodb, meter), aws.settings.runs_table, meter


def run_item(job_id: str, minute: int, state: RunState = RunState.SUCCEEDED) -> dict:
    """The item of ``job_id``'s run ``minute`` minutes after T0 (about 300 bytes)."""
    at = T0 + timedelta(minutes=minute)
    return Run(
        id=make_run_id(job_id, at),
        job_id=job_id,
        tenant="acme",
        scheduled_at=at,
        due_at=at,
        state=state,
        created_at=at - timedelta(minutes=15),
    ).to_item()


def key_of(item: dict) -> dict[str, str]:
    return {"job_id": item["job_id"], "run_key": item["run_key"]}


def put_runs(dynamo, table, job_id: str, minutes) -> list[dict[str, str]]:
    """One run of ``job_id`` per minute in ``minutes``; their keys."""
    keys = []
    for m in minutes:
        item = run_item(job_id, m)
        dynamo.put(table, item)
        keys.append(key_of(item))
    return keys


def test_a_jobs_consecutive_runs_are_read_by_one_query_at_one_rounding(store):
    dynamo, table, meter = store
    # Given 8 consecutive runs of one job and, apart, 30 later runs of the same job
    wanted = put_runs(dynamo, table, "job1", range(8))
    put_runs(dynamo, table, "job1", range(8, 38))
    meter.reset()
    # When the 8 are read
    found = read_runs(dynamo, table, wanted)
    # Then all 8 come back, whole, through one Query that read nothing else: at most 0.5 RRU
    assert sorted(found) == sorted((k["job_id"], k["run_key"]) for k in wanted)
    assert all(item["state"] == "succeeded" and item["tenant"] == "acme" for item in found.values())
    assert meter.requests == {"dynamodb.Query": 1}
    assert meter.rcu["Query"] == 0.5
    # while BatchGetItem bills each of them: 8 x 0.5
    meter.reset()
    dynamo.batch_get(table, wanted)
    assert meter.rcu["BatchGetItem"] == 4.0


def test_runs_with_others_between_are_all_found_and_the_cost_stays_bounded(store):
    dynamo, table, meter = store
    # Given a job with 200 runs, of which every 20th is wanted (others lie between each pair)
    keys = put_runs(dynamo, table, "job1", range(200))
    wanted = keys[::20]
    meter.reset()
    # When they are read
    found = read_runs(dynamo, table, wanted)
    # Then all 10 are found; one limited page (10 items) showed the keys apart, the rest by key
    assert sorted(found) == sorted((k["job_id"], k["run_key"]) for k in wanted)
    assert meter.requests["dynamodb.Query"] == 1
    assert meter.requests["dynamodb.BatchGetItem"] == 1
    assert meter.rcu["Query"] + meter.rcu["BatchGetItem"] <= 0.5 + 10 * 0.5


def test_keys_without_an_item_are_absent_and_single_keys_are_read_by_key(store):
    dynamo, table, meter = store
    # Given runs of two jobs, and keys naming runs never put among them
    a = put_runs(dynamo, table, "jobA", range(3))
    b = put_runs(dynamo, table, "jobB", [0])
    ghost_inside = {"job_id": "jobA", "run_key": a[0]["run_key"][:-1] + "~"}  # sorts between a[0] and a[1]
    ghost_alone = {"job_id": "jobC", "run_key": b[0]["run_key"]}
    meter.reset()
    found = read_runs(dynamo, table, [*a, ghost_inside, *b, ghost_alone, a[0]])
    # Then exactly the existing runs come back: jobA by Query, jobB and jobC by key in one batch
    assert set(found) == {(k["job_id"], k["run_key"]) for k in [*a, *b]}
    assert meter.requests == {"dynamodb.Query": 1, "dynamodb.BatchGetItem": 1}


def test_no_keys_no_request(store):
    dynamo, table, meter = store
    assert read_runs(dynamo, table, []) == {}
    assert not meter.requests


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    existing=st.sets(st.integers(0, 59), max_size=40),
    wanted=st.sets(st.integers(0, 59), min_size=1, max_size=40),
    other_job=st.sets(st.integers(0, 59), max_size=10),
    example=st.uuids(),
)
def test_read_runs_returns_what_batch_get_returns(store, existing, wanted, other_job, example):
    dynamo, table, meter = store
    # Given a job's runs at some minutes (a partition per example: examples share the table), another
    # job's beside them, and keys for some minutes, with or without a run
    job = f"job-{example.hex[:12]}"
    put_runs(dynamo, table, job, sorted(existing))
    put_runs(dynamo, table, job + "-other", sorted(other_job))
    keys = [key_of(run_item(job, m)) for m in sorted(wanted)]
    # When the keys are read both ways
    meter.reset()
    found = read_runs(dynamo, table, keys)
    ours = meter.rcu["Query"] + meter.rcu["BatchGetItem"]
    meter.reset()
    batch = dynamo.batch_get(table, keys)
    theirs = meter.rcu["BatchGetItem"]
    # Then the same items, and never more than one limited page of other items over the by-key price
    assert found == {(i["job_id"], i["run_key"]): i for i in batch}
    page = math.ceil(len(keys) * max(item_size(serialize(run_item(job, m))) for m in range(60)) / 4096)
    assert ours <= theirs + 0.5 * page + 0.5


def test_many_jobs_read_at_once_give_what_one_at_a_time_gives(store):
    dynamo, table, meter = store
    # Given ten jobs of five runs each
    keys = [k for j in range(10) for k in put_runs(dynamo, table, f"job{j}", range(5))]
    # When read one job at a time and four jobs at a time
    meter.reset()
    alone = read_runs(dynamo, table, keys, concurrency=1)
    one_at_a_time = dict(meter.rcu)
    meter.reset()
    together = read_runs(dynamo, table, keys, concurrency=4)
    # Then the same 50 items, for the same ten Queries and read units
    assert alone == together and len(together) == 50
    assert meter.requests == {"dynamodb.Query": 10} and dict(meter.rcu) == one_at_a_time


def test_reads_made_at_once_are_made_in_the_callers_context(store, monkeypatch):
    dynamo, table, _ = store
    # Given ten jobs' runs, read four jobs at a time by a caller serving tenant acme
    keys = [k for j in range(10) for k in put_runs(dynamo, table, f"job{j}", range(3))]
    lanes: list[str] = []
    query = dynamo.query

    def seen(*args, **kwargs):
        lanes.append(obs.current_lane())
        return query(*args, **kwargs)

    monkeypatch.setattr(dynamo, "query", seen)
    with obs.request_lane("acme"):
        read_runs(dynamo, table, keys, concurrency=4)
    # Then every Query, on whichever thread, was made for acme (the embedded mode tags it so)
    assert lanes == ["acme"] * 10
