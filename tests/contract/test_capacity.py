"""The capacity figures' contract: the metering adapter (jobsched.aws.metering.Dynamo) over the fake's
boto3-shaped face (jobsched.testing.wire.InMemoryDynamoClient) estimates the same write and read units,
per operation and per table, as over moto. Each test runs on both (``[memory]``, ``[moto]``).

The figures asserted are the ones moto's responses give the meter (DynamoDB's sizing rules on the
returned items, decision 0043); the tests of ``tests/services`` that assert capacity units rely on them.
"""

from __future__ import annotations

import pytest

from jobsched.aws.metering import Dynamo, Meter, table_specs
from jobsched.ports.tables import ConditionFailed
from jobsched.runtime import resources as r
from jobsched.testing.wire import InMemoryDynamoClient

BIG = "x" * 1500  # over one write unit (1 KB) on its own


def metered(backend) -> tuple[Dynamo, Meter]:
    """The real adapter, metering on a meter of its own, over moto's client or the fake's wire face."""
    meter = Meter()
    client = backend.table.client if backend.kind == "moto" else InMemoryDynamoClient(backend.table)
    return Dynamo(client, table_specs(backend.settings), meter), meter


def units(meter: Meter) -> dict:
    snapshot = meter.snapshot()
    dynamodb = {k: v for k, v in snapshot["dynamodb"].items() if k != "reported_capacity_units"}
    return {"dynamodb": dynamodb, "requests": snapshot["requests"]}


def test_writes_are_billed_by_item_size_and_the_index_entries_they_touch(backend):
    dynamo, meter = metered(backend)
    jobs, runs = backend.settings.jobs_table, backend.settings.runs_table
    # Given a job in the sparse due index (KEYS_ONLY), a large one out of it, and a dead-lettered run
    dynamo.put(jobs, {"tenant": "acme", "job_id": "j1", "due_shard": "p1", "due_at": 100, "spec": "s"})
    dynamo.put(
        jobs, {"tenant": "acme", "job_id": "j2", "blob": BIG}, condition="attribute_not_exists(job_id)"
    )
    dynamo.put(runs, {"job_id": "j1", "run_key": "r1", "dl_tenant": "acme", "dl_at": "t", "blob": BIG})
    # When the job is refused a second create, advanced (its index key rewritten), one put unindexed
    with pytest.raises(ConditionFailed):
        dynamo.put(jobs, {"tenant": "acme", "job_id": "j2"}, condition="attribute_not_exists(job_id)")
    dynamo.update(jobs, {"tenant": "acme", "job_id": "j1"}, "SET due_at = :d", values={":d": 160})
    dynamo.update(jobs, {"tenant": "acme", "job_id": "j1"}, "REMOVE due_shard, due_at")
    with pytest.raises(ConditionFailed):
        dynamo.update(
            jobs, {"tenant": "acme", "job_id": "j2"}, "SET n = :n", condition="n = :n", values={":n": 1}
        )
    dynamo.delete(runs, {"job_id": "j1", "run_key": "r1"})
    with pytest.raises(ConditionFailed):
        dynamo.delete(runs, {"job_id": "j1", "run_key": "r1"}, condition="attribute_exists(run_key)")
    dynamo.batch_write(runs, [{"job_id": "j3", "run_key": f"r{i}", "blob": BIG * (i % 2)} for i in range(4)])
    # Then each is billed as DynamoDB bills it
    assert units(meter) == {
        "dynamodb": {
            "requests": 10,
            "wcu": 27.0,
            "rcu": 0.0,
            "wcu_by_operation": {"PutItem": 9.0, "UpdateItem": 7.0, "DeleteItem": 5.0, "BatchWriteItem": 6.0},
            "rcu_by_operation": {"PutItem": 0.0, "UpdateItem": 0.0, "DeleteItem": 0.0, "BatchWriteItem": 0.0},
            "wcu_by_table": {jobs: 12.0, runs: 15.0},
            "rcu_by_table": {jobs: 0.0, runs: 0.0},
        },
        "requests": {
            "dynamodb.PutItem": 4,
            "dynamodb.UpdateItem": 3,
            "dynamodb.DeleteItem": 2,
            "dynamodb.BatchWriteItem": 1,
        },
    }


def test_reads_are_billed_by_what_they_return(backend):
    dynamo, meter = metered(backend)
    runs, leases = backend.settings.runs_table, backend.settings.leases_table
    items = [{"job_id": "j1", "run_key": f"r{i}", "blob": BIG * 2, "n": i} for i in range(5)]
    dynamo.batch_write(runs, items)
    dynamo.put(leases, {"lease_key": "k", "owner": "w", "token": 7})
    meter.reset()
    # When items are read: singly (consistent, eventually, projected), by query (a page, a filter),
    # in a batch (projected) and by scan
    dynamo.get(runs, {"job_id": "j1", "run_key": "r1"}, consistent=True)
    dynamo.get(runs, {"job_id": "j1", "run_key": "r2"})
    dynamo.get(runs, {"job_id": "j1", "run_key": "r3"}, attributes=["n"])
    dynamo.get(leases, {"lease_key": "missing"}, consistent=True)
    dynamo.query(runs, "job_id = :j", {":j": "j1"}, limit=3)
    dynamo.query(runs, "job_id = :j", {":j": "j1", ":n": 2}, filter_expression="n >= :n", consistent=True)
    dynamo.batch_get(
        runs, [{"job_id": "j1", "run_key": f"r{i}"} for i in range(4)], attributes=["run_key", "n"]
    )
    dynamo.scan_all(leases)
    # Then each is billed as DynamoDB bills what came back
    snapshot = units(meter)
    assert snapshot["dynamodb"]["rcu_by_operation"] == {
        "GetItem": 3.0,
        "Query": 4.5,
        "BatchGetItem": 2.0,
        "Scan": 0.5,
    }
    assert snapshot["dynamodb"]["rcu_by_table"] == {runs: 8.5, leases: 1.0, "": 0.5}
    assert snapshot["requests"] == {
        "dynamodb.GetItem": 4,
        "dynamodb.Query": 2,
        "dynamodb.BatchGetItem": 1,
        "dynamodb.Scan": 1,
    }


def test_a_second_deployments_tables_are_created_from_jobscheds_specs(backend):
    # Given a client (moto's, or the fake's wire face) / When the Jobs table of another prefix is created
    client = backend.table.client if backend.kind == "moto" else InMemoryDynamoClient(backend.table)
    client.create_table(**r.JOBS_TABLE.create_table_kwargs("second-jobs"))
    client.put_item(TableName="second-jobs", Item={"tenant": {"S": "acme"}, "job_id": {"S": "j"}})
    # Then it holds items under that schema, and a second create of it is refused
    got = client.get_item(TableName="second-jobs", Key={"tenant": {"S": "acme"}, "job_id": {"S": "j"}})
    assert got["Item"] == {"tenant": {"S": "acme"}, "job_id": {"S": "j"}}
    with pytest.raises(Exception) as refused:
        client.create_table(**r.JOBS_TABLE.create_table_kwargs("second-jobs"))
    assert refused.value.response["Error"]["Code"] == "ResourceInUseException"
