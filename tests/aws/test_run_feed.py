"""The tenant run feed on the in-memory fakes: the tenant listing it backs pages newest first without loss or
repetition (duplicated entries, entries of runs never created), stays within the tenant, and
survives a dispatcher crash between the feed write and the run puts (docs/decisions/0004)."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobsched.aws.metering import Dynamo
from jobsched.aws.run_feed import RunFeed
from jobsched.aws.runs_store import RunsStore
from jobsched.core.feed import feed_partition
from jobsched.core.models import Run, Trigger, make_run_id, tenant_sort_for
from tests.aws.conftest import T0
from tests.aws.memory import memory_aws_units, memory_pipeline  # noqa: F401  (on the in-memory fakes)

JOBS = ("jAlpha0000000000000000", "jBravo0000000000000000", "jCharlie00000000000000")
_tenants = itertools.count()


def _run(tenant: str, job_id: str, minute: int, manual: bool = False) -> Run:
    at = T0 + timedelta(minutes=minute)
    trigger = Trigger.MANUAL if manual else Trigger.SCHEDULE
    return Run(
        id=make_run_id(job_id, at, trigger, "n1" if manual else None),
        job_id=job_id,
        tenant=tenant,
        trigger=trigger,
        scheduled_at=at,
        due_at=at,
        created_at=T0,
    )


def _all_pages(store: RunsStore, tenant: str, limit: int) -> list[list[Run]]:
    pages, cursor = [], None
    for _ in range(1000):
        page, cursor = store.list_for_tenant(tenant, limit=limit, start_after=cursor)
        pages.append(page)
        if cursor is None:
            return pages
    raise AssertionError("the listing never ended")


def _feed_items(pipeline, tenant: str) -> list[dict]:
    items, _ = pipeline.dispatcher.runs.dynamo.query(
        pipeline.env.settings.runs_table, "job_id = :p", {":p": feed_partition(tenant)}
    )
    return items


# kind: created once | created and recorded again (a re-tick) | recorded but never created (a crash)
RUN_ROWS = st.lists(
    st.tuples(
        st.sampled_from(JOBS),
        st.integers(0, 4 * 60),  # four hour buckets and the next one's first minute
        st.booleans(),  # a manual run (a suffixed run key) or a scheduled one
        st.sampled_from(["created", "duplicated", "never_created"]),
    ),
    max_size=25,
    unique_by=lambda row: row[:3],
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=RUN_ROWS, limit=st.integers(1, 7))
def test_a_tenant_listing_is_newest_first_and_pages_without_loss_or_repetition(pipeline, rows, limit):
    # Given a tenant's runs across jobs and hour buckets, some recorded twice in the feed and some
    # recorded but never created
    tenant = f"t{next(_tenants)}"  # examples share the table: fresh tenant and job ids for each
    store = pipeline.dispatcher.runs
    created: list[Run] = []
    for job, minute, manual, kind in rows:
        run = _run(tenant, f"{job}{tenant}", minute, manual)
        if kind == "never_created":
            store.announce([run])
            continue
        store.create(run)
        created.append(run)
        if kind == "duplicated":
            store.announce([run])
    # When every page is read, following the cursors
    pages = _all_pages(store, tenant, limit)
    # Then the pages hold each created run once, newest scheduled first, full but for the last
    listed = [r.id for page in pages for r in page]
    expected = sorted(created, key=lambda r: tenant_sort_for(r.run_key, r.job_id), reverse=True)
    assert listed == [r.id for r in expected]
    assert all(len(page) == limit for page in pages[:-1]) and len(pages[-1]) <= limit


def test_another_tenants_runs_never_appear_even_if_a_feed_entry_names_them(pipeline):
    # Given runs of two tenants in the same hour, and an entry in acme's feed naming globex's run
    store = pipeline.dispatcher.runs
    acme = _run("acme", JOBS[0], 5)
    globex = _run("globex", JOBS[1], 6)
    store.create(acme)
    store.create(globex)
    store.feed.record([Run(**{**vars(globex), "tenant": "acme"})])  # a crafted entry, not a real run
    # When each tenant lists its runs / Then it sees its own only
    assert [r.id for r in store.list_for_tenant("acme")[0]] == [acme.id]
    assert [r.id for r in store.list_for_tenant("globex")[0]] == [globex.id]


HOURLY = {"name": "report", "schedule": "0 * * * *", "target": {"handler": "echo"}}


class CrashBeforePuts(RunsStore):
    """A store whose process dies after the feed write, before the first run put."""

    def put_announced(self, run):
        raise RuntimeError("the dispatcher process died")


def test_a_tick_that_crashed_after_the_feed_write_is_completed_by_the_next_and_listed_once(pipeline):
    # Given three hourly jobs due at 13:00, and a tick whose process dies right after the feed write
    jobs = [pipeline.jobs.create("acme", HOURLY, T0 + timedelta(minutes=1)) for _ in range(3)]
    store = pipeline.dispatcher.runs
    pipeline.dispatcher.runs = CrashBeforePuts(store.dynamo, store.table)
    tick = T0 + timedelta(minutes=59, seconds=30)
    try:
        pipeline.dispatcher.dispatch_jobs(jobs, tick)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the crashing tick did not crash")
    assert store.list_for_tenant("acme") == ([], None)  # recorded in the feed, not created
    # When the next tick runs (the jobs were not advanced: same plan)
    pipeline.dispatcher.runs = store
    summary = pipeline.dispatcher.dispatch_jobs(jobs, tick + timedelta(seconds=10))
    # Then it creates the runs, the feed holds their entries twice, and the listing shows each once
    thirteen = T0 + timedelta(hours=1)
    assert summary.runs_created == 3
    assert len(_feed_items(pipeline, "acme")) == 2
    listed, cursor = store.list_for_tenant("acme")
    assert sorted(r.id for r in listed) == sorted(make_run_id(j.id, thirteen) for j in jobs)
    assert cursor is None


def test_a_backfill_records_its_runs_in_one_feed_write_per_hour(pipeline):
    # Given a per-minute job / When two hours of occurrences are backfilled
    later = T0 + timedelta(days=1, minutes=1)  # nothing due within the look-ahead: no run at create
    job = pipeline.jobs.create("acme", HOURLY | {"schedule": "*/10 * * * *"}, later)
    pipeline.meter.reset()
    runs = pipeline.jobs.backfill("acme", job.id, T0, T0 + timedelta(minutes=110), later)
    # Then one BatchWriteItem carries one feed item per hour, and the listing shows the 12 runs
    assert pipeline.meter.snapshot()["requests"]["dynamodb.BatchWriteItem"] == 1
    assert len(_feed_items(pipeline, "acme")) == 2
    assert [r.id for r in pipeline.dispatcher.runs.list_for_tenant("acme", limit=50)[0]] == [
        r.id for r in reversed(runs)
    ]


class Throttled:
    """The DynamoDB client, except that the first BatchWriteItem processes one item and hands the rest
    back as unprocessed (what DynamoDB does under throttling)."""

    def __init__(self, client):
        self.client = client
        self.throttled = False

    def batch_write_item(self, RequestItems, **kwargs):
        if self.throttled:
            return self.client.batch_write_item(RequestItems=RequestItems, **kwargs)
        self.throttled = True
        [(table, requests)] = RequestItems.items()
        response = self.client.batch_write_item(RequestItems={table: requests[:1]}, **kwargs)
        return {**response, "UnprocessedItems": {table: requests[1:]}}

    def __getattr__(self, name):
        return getattr(self.client, name)


def test_unprocessed_feed_items_are_retried_after_a_backoff_and_billed_once(pipeline):
    # Given a client that leaves part of the first batch unprocessed
    settings_ = pipeline.env.settings
    sleeps: list[float] = []
    dynamo = Dynamo(Throttled(pipeline.env.clients.dynamodb), pipeline.dispatcher.runs.dynamo.specs)
    dynamo.sleep = sleeps.append
    feed = RunFeed(dynamo, settings_.runs_table)
    runs = [_run(f"tenant{i}", JOBS[0], 0) for i in range(3)]
    # When the three tenants' runs are recorded
    written = feed.record(runs)
    # Then all three feed items are stored, after one backoff, each billed once (1 WRU)
    assert written == 3 and len(sleeps) == 1
    assert all(len(_feed_items(pipeline, f"tenant{i}")) == 1 for i in range(3))
    snapshot = dynamo.meter.snapshot()
    assert snapshot["requests"]["dynamodb.BatchWriteItem"] == 2 and snapshot["dynamodb"]["wcu"] == 3


class AlwaysThrottled(Throttled):
    """The DynamoDB client, except that BatchWriteItem never processes anything."""

    def batch_write_item(self, RequestItems, **kwargs):
        return {"UnprocessedItems": RequestItems}


def test_feed_items_left_unprocessed_eight_times_raise_a_throttling_client_error(pipeline):
    # Given a table that keeps handing every item back (sustained throttling)
    settings_ = pipeline.env.settings
    sleeps: list[float] = []
    dynamo = Dynamo(AlwaysThrottled(pipeline.env.clients.dynamodb), pipeline.dispatcher.runs.dynamo.specs)
    dynamo.sleep = sleeps.append
    feed = RunFeed(dynamo, settings_.runs_table)
    # When runs are recorded
    with pytest.raises(ClientError) as raised:
        feed.record([_run("acme", JOBS[0], 0)])
    # Then, after eight tries with backoff, it fails as a ClientError (callers treat it as throttling:
    # the API's immediate dispatch leaves the stored job to the next tick), nothing billed as written
    assert raised.value.response["Error"]["Code"] == "UnprocessedItems"
    assert len(sleeps) == 7
    assert dynamo.meter.snapshot()["dynamodb"]["wcu"] == 0
