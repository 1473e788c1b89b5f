"""Retention in moto: run items carry the Runs table TTL, a replay moves it, and the embedded mode's
housekeeping deletes what DynamoDB TTL and the bucket's lifecycle rule delete on AWS."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.outputs import ObjectExpired
from jobsched.aws.runs_store import RunsStore
from jobsched.core.feed import feed_partition
from jobsched.local.housekeeping import Housekeeper
from jobsched.runtime import resources as r
from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import Kit, fail_permanently, run_service

RETENTION = timedelta(days=7)


@pytest.fixture
def kit(aws, clock):
    kit = Kit(aws, clock)
    kit.runs = RunsStore(kit.dynamo, aws.settings.runs_table, retention=RETENTION)
    return kit


def _item(aws, run) -> dict | None:
    key = {"job_id": {"S": run.job_id}, "run_key": {"S": run.run_key}}
    return aws.clients.dynamodb.get_item(TableName=aws.settings.runs_table, Key=key).get("Item")


def _feed_expiries(aws, tenant: str) -> list[int]:
    items = aws.clients.dynamodb.query(
        TableName=aws.settings.runs_table,
        KeyConditionExpression="job_id = :p",
        ExpressionAttributeValues={":p": {"S": feed_partition(tenant)}},
    )["Items"]
    return sorted(int(i["expires_at"]["N"]) for i in items)


def _housekeeper(aws) -> Housekeeper:
    tables = {spec.env_var: aws.settings.to_env()[spec.env_var] for spec in r.TABLES}
    return Housekeeper(
        dynamodb=aws.clients.dynamodb,
        s3=aws.clients.s3,
        tables=tables,
        bucket=aws.settings.bucket,
        retention=RETENTION,
    )


def test_a_created_run_and_its_feed_entry_expire_a_retention_after_it_was_due(kit, aws):
    # Given a store with a 7-day retention / When a run is created (30 s before it is due)
    run, _ = kit.new_run()
    # Then the item's TTL attribute and its feed item's are due_at + 7 days
    expiry = int((run.due_at + RETENTION).timestamp())
    assert int(_item(aws, run)["expires_at"]["N"]) == expiry
    assert _feed_expiries(aws, "acme") == [expiry]


def test_a_run_queued_ahead_is_kept_a_retention_from_its_due_instant(kit, aws, clock):
    """Given a run created 15 minutes before it is due (the enqueue horizon), When it is created,
    Then it and its feed entry expire a retention after its due instant, not after its creation: a
    short retention (the embedded mode's minutes) never deletes a run before it was due."""
    due = clock.now() + timedelta(minutes=15)
    run, _ = kit.new_run(scheduled_at=due)
    expiry = int((due + RETENTION).timestamp())
    assert run.created_at < due
    assert int(_item(aws, run)["expires_at"]["N"]) == expiry
    assert _feed_expiries(aws, "acme") == [expiry]


def test_a_replay_keeps_the_run_a_whole_retention_from_the_replay(kit, aws, clock):
    # Given a dead letter created at T0 - 30 s
    run, _ = fail_permanently(kit)
    # When it is replayed 6 days later
    clock.advance(days=6)
    run_service(kit).replay("acme", run.id, clock.now())
    # Then its record expires 7 days after the replay, and its feed names it with that expiry too
    expiry = int((clock.now() + RETENTION).timestamp())
    assert int(_item(aws, run)["expires_at"]["N"]) == expiry
    assert _feed_expiries(aws, "acme")[-1] == expiry


def test_housekeeping_deletes_runs_and_feed_items_past_their_ttl_and_keeps_the_others(kit, aws, clock):
    # Given a run due at T0 (created 30 s before) and one due a day later
    old, _ = kit.new_run(job_id="jobold")
    clock.advance(days=1)
    new, _ = kit.new_run(job_id="jobnew")
    housekeeper = _housekeeper(aws)
    # When housekeeping runs one second before the first expiry / Then nothing is deleted
    first_expiry = old.due_at + RETENTION
    assert housekeeper.expire(first_expiry - timedelta(seconds=1)).items == 0
    # When it runs just after it
    done = housekeeper.expire(first_expiry + timedelta(seconds=1))
    # Then the old run, its feed item and its in-flight ledger item are gone, the newer ones stay
    assert done.items == 3
    assert _item(aws, old) is None and _item(aws, new) is not None
    assert _feed_expiries(aws, "acme") == [int((new.due_at + RETENTION).timestamp())]


def test_housekeeping_deletes_objects_a_retention_after_they_were_written(kit, aws, clock):
    # Given a run whose large output was written to the bucket
    run, msg = kit.new_run(payload={"blob": "y" * 5000})
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    key = kit.runs.get(run.id).output_ref
    written = aws.clients.s3.head_object(Bucket=aws.settings.bucket, Key=key)["LastModified"]
    housekeeper = _housekeeper(aws)
    # When housekeeping runs before the object is a retention old / Then it stays
    assert housekeeper.expire(written + RETENTION - timedelta(seconds=1)).objects == 0
    assert kit.outputs.get_json(key) == {"blob": "y" * 5000}
    # When it runs once the object is a retention old / Then the object is gone: reading it says so
    assert housekeeper.expire(written + RETENTION).objects == 1
    with pytest.raises(ObjectExpired, match="no longer in the bucket"):
        kit.outputs.get_json(key)
