"""The run-event log: one line per observed run state change, read from the Runs table."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta

import pytest

from jobsched.aws.metering import Dynamo
from jobsched.aws.run_feed import RunFeed
from jobsched.core.feed import FeedEntry
from jobsched.core.models import run_key_for, tenant_sort_for
from jobsched.local.events import RunEventWatcher, format_event
from jobsched.runtime import resources
from tests.local.conftest import Machinery

NOW = datetime(2026, 11, 29, 20, 45, 41, tzinfo=UTC)


class RunsFixture:
    """Writes job and run items the way the services do (only the attributes the watcher reads)."""

    def __init__(self, machinery: Machinery):
        self.dynamodb = machinery.mode.clients["dynamodb"]
        self.runs = os.environ[resources.ENV_RUNS_TABLE]
        self.jobs = os.environ[resources.ENV_JOBS_TABLE]
        self.feed = RunFeed(Dynamo(self.dynamodb, {}), self.runs)
        self.created: set[tuple[str, str]] = set()

    def job(self, tenant: str, job_id: str, name: str) -> None:
        self.dynamodb.put_item(
            TableName=self.jobs,
            Item={"tenant": {"S": tenant}, "job_id": {"S": job_id}, "name": {"S": name}},
        )

    def run(self, tenant: str, job_id: str, scheduled_at: datetime, state: str, attempt: int = 0) -> str:
        key = run_key_for(scheduled_at)
        if (job_id, key) not in self.created:  # a new run: in its tenant's feed before it is put
            self.feed.record_entries([FeedEntry(tenant, tenant_sort_for(key, job_id))])
            self.created.add((job_id, key))
        self.dynamodb.put_item(
            TableName=self.runs,
            Item={
                "job_id": {"S": job_id},
                "run_key": {"S": key},
                "tenant": {"S": tenant},
                "state": {"S": state},
                "attempt": {"N": str(attempt)},
            },
        )
        return f"{job_id}.{key}"


@pytest.fixture
def runs(machinery: Machinery) -> RunsFixture:
    return RunsFixture(machinery)


def watcher(runs: RunsFixture, tenant: str, lines: list[str], now: datetime = NOW) -> RunEventWatcher:
    return RunEventWatcher(
        dynamodb=runs.dynamodb,
        runs_table=runs.runs,
        jobs_table=runs.jobs,
        tenants=[tenant],
        stop=threading.Event(),
        sink=lines.append,
        clock=lambda: now,
    )


def test_each_state_change_of_a_run_prints_one_line(runs: RunsFixture) -> None:
    # Given a job with a queued run
    lines: list[str] = []
    runs.job("ev1", "j-echo", "demo.echo")
    run_id = runs.run("ev1", "j-echo", NOW, "queued")
    w = watcher(runs, "ev1", lines)
    w.poll()
    # When it starts, is retried, starts again and succeeds
    for state, attempt in [("running", 1), ("retrying", 1), ("running", 2), ("succeeded", 2)]:
        runs.run("ev1", "j-echo", NOW, state, attempt)
        w.poll()
    w.poll()
    # Then one line per change, with the job's name and the run id
    assert [line.split()[1:] for line in lines] == [
        ["queued", "demo.echo", run_id],
        ["started", "demo.echo", run_id],
        ["retried", "demo.echo", run_id],
        ["started", "demo.echo", run_id],
        ["succeeded", "demo.echo", run_id],
    ]


def test_runs_of_other_tenants_and_old_runs_are_not_printed(runs: RunsFixture) -> None:
    # Given a run of another tenant and a run of ours scheduled long before the window
    lines: list[str] = []
    runs.job("ev2", "j-old", "old")
    runs.run("ev2-other", "j-other", NOW, "queued")
    runs.run("ev2", "j-old", NOW - timedelta(hours=2), "failed")
    # When the watcher polls, Then nothing is printed
    assert watcher(runs, "ev2", lines).poll() == []
    assert lines == []


def test_a_line_has_the_time_the_event_the_job_name_and_the_run_id() -> None:
    line = format_event(datetime(2026, 1, 2, 3, 4, 5), "failed", "demo.flaky", "j.20260102T030405.000Z")
    assert line == "03:04:05  failed     demo.flaky  j.20260102T030405.000Z"


def test_run_ids_line_up_whatever_the_job_names_length(runs: RunsFixture) -> None:
    """Given two jobs whose names differ in length, with a run each
    When the watcher prints their events
    Then the run ids start in the same column (the name column is padded)"""
    lines: list[str] = []
    runs.job("ev9", "j-a", "a")
    runs.job("ev9", "j-b", "a-much-longer-job-name")
    first = runs.run("ev9", "j-a", NOW, "queued")
    second = runs.run("ev9", "j-b", NOW, "queued")
    w = watcher(runs, "ev9", lines)
    w.poll()
    runs.run("ev9", "j-a", NOW, "running", 1)
    w.poll()
    by_run = {line.split()[-1]: line for line in lines}
    assert len(lines) == 3
    columns = {line.index(line.split()[-1]) for line in lines[1:]}
    assert len(columns) == 1, lines[1:]
    assert by_run[first].index(first) >= len("00:00:00  queued     ") + 16
    assert second in by_run


def test_an_unfinished_run_is_followed_after_it_leaves_the_window(runs: RunsFixture) -> None:
    # Given a running run seen by the watcher
    lines: list[str] = []
    clock = [NOW]
    runs.job("ev3", "j-slow", "slow")
    run_id = runs.run("ev3", "j-slow", NOW, "running", 1)
    w = watcher(runs, "ev3", lines)
    w.clock = lambda: clock[0]
    w.poll()
    # When it finishes an hour later, long after its scheduled instant left the window
    clock[0] = NOW + timedelta(hours=1)
    runs.run("ev3", "j-slow", NOW, "succeeded", 1)
    # Then its end is still printed
    assert [line.split()[1:] for line in w.poll()] == [["succeeded", "slow", run_id]]


def test_a_run_queued_ahead_is_reported_when_it_falls_due(runs: RunsFixture) -> None:
    # Given a run queued 30 s ahead of its instant
    lines: list[str] = []
    clock = [NOW]
    runs.job("ev4", "j-ahead", "ahead")
    run_id = runs.run("ev4", "j-ahead", NOW + timedelta(seconds=30), "queued")
    w = watcher(runs, "ev4", lines)
    w.clock = lambda: clock[0]
    # When the watcher polls before and then at its instant
    assert w.poll() == []
    clock[0] = NOW + timedelta(seconds=30)
    # Then the queued line comes at its instant
    assert [line.split()[1:] for line in w.poll()] == [["queued", "ahead", run_id]]


class CountingDynamo:
    """The real client, with the keys of every run item ``batch_get_item`` reads noted (and of every
    feed item apart), and every query's projection."""

    def __init__(self, client) -> None:
        self.client = client
        self.keys_read: list[str] = []
        self.feed_items_read: list[str] = []
        self.query_projections: list[str | None] = []

    def batch_get_item(self, **kwargs):
        for request in kwargs["RequestItems"].values():
            for key in request["Keys"]:
                feed = key["job_id"]["S"].startswith("feed#")
                (self.feed_items_read if feed else self.keys_read).append(key["run_key"]["S"])
        return self.client.batch_get_item(**kwargs)

    def query(self, **kwargs):
        self.query_projections.append(kwargs.get("ProjectionExpression"))
        return self.client.query(**kwargs)

    def __getattr__(self, name):
        return getattr(self.client, name)


def test_a_run_queued_ahead_is_not_read_before_its_instant(runs: RunsFixture) -> None:
    # Given a run queued 30 s ahead and a run due now, watched through a client that notes its reads
    lines: list[str] = []
    runs.job("ev5", "j-ahead", "ahead")
    runs.run("ev5", "j-ahead", NOW + timedelta(seconds=30), "queued")
    runs.run("ev5", "j-now", NOW, "queued")
    w = watcher(runs, "ev5", lines)
    w.dynamodb = counting = CountingDynamo(runs.dynamodb)
    # When the watcher polls before the first run's instant
    w.poll()
    # Then only the run due now was read
    assert counting.keys_read == [run_key_for(NOW)]


class NoScans(CountingDynamo):
    """The real client, refusing table scans."""

    def scan(self, **kwargs):
        raise AssertionError(f"the watcher scanned {kwargs.get('TableName')}")


def test_the_watcher_reads_the_feed_buckets_the_window_spans_without_scanning(runs: RunsFixture) -> None:
    # Given a window that crosses an hour (21:03 back to 20:53), a run inside it in the previous hour,
    # one earlier in that hour (outside the window), and a run recorded twice in the feed
    lines: list[str] = []
    now = datetime(2026, 11, 29, 21, 3, 0, tzinfo=UTC)
    runs.job("ev6", "j-feed", "feed")
    inside = runs.run("ev6", "j-feed", now - timedelta(minutes=8), "succeeded", 1)
    runs.run("ev6", "j-feed", now - timedelta(minutes=25), "succeeded", 1)
    twice = runs.run("ev6", "j-feed", now, "queued")
    runs.feed.record_entries([FeedEntry("ev6", tenant_sort_for(run_key_for(now), "j-feed"))])
    w = watcher(runs, "ev6", lines, now)
    w.dynamodb = NoScans(runs.dynamodb)
    # When the watcher polls
    printed = sorted(line.split()[1:] for line in w.poll())
    # Then the two runs in the window are printed once each, the earlier one not at all
    assert printed == [["queued", "feed", twice], ["succeeded", "feed", inside]]


def test_a_feed_item_is_read_once_then_only_listed_by_key(runs: RunsFixture) -> None:
    # Given a run in the window, polled once
    lines: list[str] = []
    runs.job("ev7", "j-once", "once")
    runs.run("ev7", "j-once", NOW, "queued")
    clock = [NOW]
    w = watcher(runs, "ev7", lines)
    w.clock = lambda: clock[0]
    w.dynamodb = counting = CountingDynamo(runs.dynamodb)
    w.poll()
    assert len(counting.feed_items_read) == 1
    # When a second run is created (a new feed item) and the run moves on, and the watcher polls again
    runs.run("ev7", "j-once", NOW + timedelta(seconds=1), "queued")
    runs.run("ev7", "j-once", NOW, "succeeded", 1)
    clock[0] = NOW + timedelta(seconds=1)
    printed = [line.split()[1] for line in w.poll()]
    # Then only the new feed item was read whole; every feed listing asked for the items' keys alone
    assert len(counting.feed_items_read) == 2 and len(set(counting.feed_items_read)) == 2
    assert counting.query_projections == ["run_key", "run_key"]
    assert sorted(printed) == ["queued", "succeeded"]


def test_finished_runs_that_left_the_window_are_forgotten(runs: RunsFixture) -> None:
    # Given a finished run and an unfinished one, both seen at NOW
    lines: list[str] = []
    runs.job("ev8", "j-old", "old")
    runs.run("ev8", "j-old", NOW - timedelta(seconds=5), "succeeded", 1)
    running = runs.run("ev8", "j-old", NOW - timedelta(seconds=4), "running", 1)
    clock = [NOW]
    w = watcher(runs, "ev8", lines)
    w.clock = lambda: clock[0]
    w.poll()
    assert len(w._seen["ev8"]) == 2
    # When the watcher polls after both left its window
    clock[0] = NOW + w.window + timedelta(minutes=1)
    w.poll()
    # Then it keeps only the unfinished run (still followed), not the finished one
    assert list(w._seen["ev8"]) == [tuple(running.split(".", 1))]
