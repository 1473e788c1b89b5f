"""What AWS does by itself and moto does not: TTL deletions and the bucket's lifecycle expiry.

On AWS, DynamoDB deletes an item some time after its TTL attribute has passed (usually within a few
days), and S3 deletes an object once the bucket's lifecycle rule expires it (``retention_days`` after
it was written, rounded to the next midnight UTC). moto keeps both forever, so without this module a
run in the embedded mode would never expire and its output would never go away: code that copes with
an expired output would never be exercised. :class:`Housekeeper` does both deletions, from the same
table specs as infra/ (every table whose spec names a TTL attribute) and the same retention setting;
the embedded mode calls :meth:`Housekeeper.expire` on a schedule (``LocalConfig.housekeeping_seconds``).

It deletes an item as soon as its TTL instant has passed (AWS: later, never earlier) and an object as
soon as it is ``retention`` old (AWS: up to a day later). Each item delete is conditional on the TTL
value it read, so an item whose expiry moved meanwhile (a replayed run) is kept, as on AWS.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError

from jobsched.runtime import resources

log = logging.getLogger(__name__)

#: S3 DeleteObjects takes at most this many keys per call.
_DELETE_BATCH = 1000


@dataclass(frozen=True)
class Expired:
    """What one :meth:`Housekeeper.expire` pass deleted."""

    items: int = 0
    objects: int = 0


class Housekeeper:
    """Deletes expired items of every TTL table and expired objects of the bucket (clients injected).

    ``tables`` maps a table spec's env var to the physical name (:attr:`Provisioned.tables`).
    """

    def __init__(
        self,
        *,
        dynamodb: Any,
        s3: Any,
        tables: Mapping[str, str],
        bucket: str | None,
        retention: timedelta,
    ):
        self._dynamodb = dynamodb
        self._s3 = s3
        self._tables = dict(tables)
        self._bucket = bucket
        self._retention = retention

    def expire(self, now: datetime) -> Expired:
        """One pass at ``now``: delete what AWS would by now be entitled to delete."""
        items = sum(
            self._expire_items(spec, self._tables[spec.env_var], now)
            for spec in resources.TABLES
            if spec.ttl_attribute and spec.env_var in self._tables
        )
        objects = self._expire_objects(now) if self._bucket else 0
        if items or objects:
            log.debug("housekeeping: %d expired items and %d expired objects deleted", items, objects)
        return Expired(items=items, objects=objects)

    def _expire_items(self, spec: resources.TableSpec, table: str, now: datetime) -> int:
        keys = [k.name for k in (spec.partition, spec.sort) if k]
        names = {f"#k{i}": name for i, name in enumerate(keys)} | {"#ttl": str(spec.ttl_attribute)}
        scan: dict[str, Any] = {
            "TableName": table,
            "FilterExpression": "#ttl < :now",
            "ProjectionExpression": ", ".join([*(f"#k{i}" for i in range(len(keys))), "#ttl"]),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {":now": {"N": str(int(now.timestamp()))}},
        }
        deleted = 0
        for page in self._dynamodb.get_paginator("scan").paginate(**scan):
            for item in page.get("Items", []):
                try:
                    self._dynamodb.delete_item(
                        TableName=table,
                        Key={k: item[k] for k in keys},
                        ConditionExpression="#ttl = :read",
                        ExpressionAttributeNames={"#ttl": str(spec.ttl_attribute)},
                        ExpressionAttributeValues={":read": item[str(spec.ttl_attribute)]},
                    )
                    deleted += 1
                except ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                        raise
        return deleted

    def _expire_objects(self, now: datetime) -> int:
        cutoff = now - self._retention
        expired = [
            obj["Key"]
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket)
            for obj in page.get("Contents", [])
            if obj["LastModified"] <= cutoff
        ]
        for start in range(0, len(expired), _DELETE_BATCH):
            chunk = expired[start : start + _DELETE_BATCH]
            self._s3.delete_objects(
                Bucket=self._bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )
        return len(expired)
