"""The boto3-shaped calls tests make on the fakes as on a client (``delete_item``, ``delete_object``):
the fake and moto's client answer them alike. Each test runs on both (``[memory]``, ``[moto]``).

tests/api removes an item or an object behind a store's back this way (another container's write, the
bucket's lifecycle rule), on the in-memory fakes.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from jobsched.aws.outputs import ObjectExpired, OutputStore
from jobsched.core.models import make_run_id
from tests.aws.conftest import T0


def dynamodb(backend):
    """What a test calls as a DynamoDB client: moto's boto3 client, or the fake tables themselves."""
    return backend.table.client if backend.kind == "moto" else backend.table


def test_delete_item_removes_the_item_and_a_missing_item_is_no_error(backend):
    # Given an item written through the Table port
    leases = backend.settings.leases_table
    backend.table.put(leases, {"lease_key": "principal#r", "tenant": "acme"})
    # When it is deleted by key through the client, twice
    first = dynamodb(backend).delete_item(
        TableName=leases, Key={"lease_key": {"S": "principal#r"}}, ReturnValues="ALL_OLD"
    )
    second = dynamodb(backend).delete_item(TableName=leases, Key={"lease_key": {"S": "principal#r"}})
    # Then the first returns the old item, the second nothing, and the item is gone
    assert first["Attributes"] == {"lease_key": {"S": "principal#r"}, "tenant": {"S": "acme"}}
    assert "Attributes" not in second
    assert backend.table.get(leases, {"lease_key": "principal#r"}) is None


def test_a_refused_delete_item_keeps_the_item(backend):
    leases = backend.settings.leases_table
    backend.table.put(leases, {"lease_key": "d", "owner": "a"})
    with pytest.raises(ClientError) as refused:
        dynamodb(backend).delete_item(
            TableName=leases,
            Key={"lease_key": {"S": "d"}},
            ConditionExpression="#o = :me",
            ExpressionAttributeNames={"#o": "owner"},
            ExpressionAttributeValues={":me": {"S": "b"}},
        )
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert backend.table.get(leases, {"lease_key": "d"}) == {"lease_key": "d", "owner": "a"}


def test_delete_object_removes_an_output_and_a_missing_key_is_no_error(backend):
    # Given a large output placed in the bucket
    outputs = OutputStore(backend.s3, backend.settings.bucket)
    _, key = outputs.place_output("acme", make_run_id("job1", T0), 1, {"blob": "x" * 300_000})
    assert key is not None
    # When the object is deleted, twice (as the lifecycle rule removes it)
    backend.s3.delete_object(Bucket=backend.settings.bucket, Key=key)
    backend.s3.delete_object(Bucket=backend.settings.bucket, Key=key)
    # Then reading it says it expired
    with pytest.raises(ObjectExpired):
        outputs.get_json(key)
