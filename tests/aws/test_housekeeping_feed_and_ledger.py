"""Retention applies locally to everything a run leaves behind (issue 12 §6): the embedded mode's
housekeeping (decision 0011) deletes, past their TTL, the run, its tenant feed item and its in-flight
ledger item alike, so a long session's tables stay bounded by the retention."""

from __future__ import annotations

from datetime import timedelta

from jobsched.aws.metering import dynamo_for
from jobsched.aws.runs_store import RunsStore
from jobsched.core.feed import feed_partition
from jobsched.core.inflight import partitions
from jobsched.core.models import Job, RetrySpec, Trigger
from jobsched.core.run_records import new_run
from jobsched.local.housekeeping import Housekeeper
from jobsched.runtime import resources
from tests.aws.conftest import T0


def _items(dynamo, table: str, partition: str) -> list:
    return dynamo.query_all(table, "job_id = :p", {":p": partition}, consistent=True)


def test_housekeeping_expires_the_run_its_feed_item_and_its_ledger_item(aws):
    # Given a queued run written with a one-day retention (its feed and ledger items carry the expiry)
    table = aws.settings.runs_table
    dynamo = dynamo_for(aws.settings, aws.clients.dynamodb)
    store = RunsStore(dynamo, table, retention=timedelta(days=1))
    job = Job(
        id="jkeep",
        tenant="acme",
        name="n",
        schedule="* * * * * *",
        target={"handler": "demo.echo"},
        retry=RetrySpec(),
        created_at=T0,
        updated_at=T0,
    )
    run, _ = store.create(new_run(job, T0, Trigger.SCHEDULE, T0))
    ledger = [i for p in partitions() for i in _items(dynamo, table, p)]
    assert _items(dynamo, table, feed_partition("acme")) and ledger
    keeper = Housekeeper(
        dynamodb=aws.clients.dynamodb,
        s3=aws.clients.s3,
        tables={resources.ENV_RUNS_TABLE: table},
        bucket=None,
        retention=timedelta(days=1),
    )
    # When housekeeping runs before the expiry, then after it
    assert keeper.expire(T0 + timedelta(hours=23)).items == 0
    expired = keeper.expire(T0 + timedelta(days=1, minutes=1))
    # Then all three are gone
    assert expired.items == 3
    assert store.find(run.id) is None
    assert _items(dynamo, table, feed_partition("acme")) == []
    assert [i for p in partitions() for i in _items(dynamo, table, p)] == []
