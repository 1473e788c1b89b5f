"""The embedded mode expires what AWS expires: its housekeeping schedule deletes TTL-expired items."""

from __future__ import annotations

import os

from jobsched.runtime import resources
from tests.local.conftest import Machinery, wait_for


def test_the_embedded_mode_deletes_run_items_past_their_ttl_and_keeps_the_others(
    machinery: Machinery,
) -> None:
    # Given a run item whose TTL instant has passed and one whose TTL is far ahead
    assert machinery.mode.provisioned is not None
    table = machinery.mode.provisioned.tables[resources.ENV_RUNS_TABLE]
    dynamodb = machinery.mode.clients["dynamodb"]

    def put(run_key: str, expires_at: int) -> dict:
        key = {"job_id": {"S": "jhousekeeping"}, "run_key": {"S": run_key}}
        dynamodb.put_item(TableName=table, Item={**key, "expires_at": {"N": str(expires_at)}})
        return key

    expired = put("20260101T000000.000Z", 1_000_000_000)  # 2001
    kept = put("20260101T000001.000Z", 4_000_000_000)  # 2096
    # When the housekeeping schedule has run (every 0.5 s in these tests; 60 s by default)
    # Then the expired item is deleted, as DynamoDB TTL would, and the other stays
    wait_for(lambda: "Item" not in dynamodb.get_item(TableName=table, Key=expired, ConsistentRead=True))
    assert "Item" in dynamodb.get_item(TableName=table, Key=kept, ConsistentRead=True)


def test_the_functions_read_the_configured_retention(machinery: Machinery) -> None:
    # Given the embedded mode's retention_days / Then the functions' environment carries it
    assert os.environ[resources.ENV_RETENTION_DAYS] == str(machinery.mode.config.retention_days)
