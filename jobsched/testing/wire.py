"""A boto3-shaped DynamoDB client over :class:`~jobsched.testing.InMemoryTables`, for the capacity figures.

:class:`jobsched.aws.metering.Dynamo` estimates what AWS bills from the items each response carries
(item sizes, index projections: the rules in its module docstring). The fake tables are a
:class:`~jobsched.ports.tables.Table` themselves, so the stores use them directly and only requests are
counted. A test that asserts write or read units wraps the same tables in :class:`InMemoryDynamoClient`
instead: the real ``Dynamo`` adapter then runs over it, serializing each item to the wire format and
metering each response exactly as it does over moto (``tests/contract/test_capacity.py`` holds the two
to the same figures). What is not modelled: ``ConsumedCapacity`` (moto reports a constant, so the
meter's ``reported_capacity_units`` stays 0 here), unprocessed batch items, the 1 MB page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobsched.aws.sizing import Meter, deserialize, serialize
from jobsched.ports.tables import ConditionFailed
from jobsched.testing.tables import InMemoryTables, _check_failed, _expressions

__all__ = ["InMemoryDynamoClient"]


def _attributes(projection: str | None, names: Mapping[str, str] | None) -> list[str] | None:
    """The attribute names of a ``ProjectionExpression`` (top-level names, placeholders resolved)."""
    if not projection:
        return None
    names = names or {}
    return [names.get(part.strip(), part.strip()) for part in projection.split(",")]


class InMemoryDynamoClient:
    """The DynamoDB client calls :class:`jobsched.aws.metering.Dynamo` makes, answered by ``tables``.

    Requests are counted by the adapter's meter, not the tables' (the client works on a view of the
    same items with a meter of its own)."""

    def __init__(self, tables: InMemoryTables):
        self.tables = tables.metered(Meter())

    def create_table(self, TableName: str, **kwargs: Any) -> dict[str, Any]:
        return self.tables.create_table(TableName, **kwargs)

    def put_item(self, TableName: str, Item: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.tables.put_item(TableName, Item, **kwargs)

    def update_item(self, TableName: str, Key: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self.tables.update_item(TableName, Key, **kwargs)

    def delete_item(
        self, TableName: str, Key: Mapping[str, Any], ReturnValues: str = "NONE", **kwargs: Any
    ) -> dict[str, Any]:
        condition, names, values = _expressions(kwargs)
        try:
            old = self.tables.delete(
                TableName, deserialize(Key), condition=condition, names=names, values=values
            )
        except ConditionFailed as failed:
            raise _check_failed(failed, "DeleteItem") from None
        return {"Attributes": serialize(old)} if old is not None and ReturnValues == "ALL_OLD" else {}

    def get_item(
        self,
        TableName: str,
        Key: Mapping[str, Any],
        ConsistentRead: bool = False,
        ProjectionExpression: str | None = None,
        ExpressionAttributeNames: Mapping[str, str] | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        found = self.tables.get(
            TableName,
            deserialize(Key),
            consistent=ConsistentRead,
            attributes=_attributes(ProjectionExpression, ExpressionAttributeNames),
        )
        return {"Item": serialize(found)} if found is not None else {}

    def query(self, **kwargs: Any) -> dict[str, Any]:
        return self.tables.query(**kwargs)

    def scan(self, **kwargs: Any) -> dict[str, Any]:
        return self.tables.scan(**kwargs)

    def batch_write_item(self, RequestItems: Mapping[str, list[dict[str, Any]]], **_: Any) -> dict[str, Any]:
        for table, requests in RequestItems.items():
            self.tables.batch_write(table, [deserialize(r["PutRequest"]["Item"]) for r in requests])
        return {"UnprocessedItems": {}}

    def batch_get_item(self, RequestItems: Mapping[str, Mapping[str, Any]], **_: Any) -> dict[str, Any]:
        responses: dict[str, list[dict[str, Any]]] = {}
        for table, request in RequestItems.items():
            found = self.tables.batch_get(
                table,
                [deserialize(k) for k in request["Keys"]],
                consistent=request.get("ConsistentRead", False),
                attributes=_attributes(
                    request.get("ProjectionExpression"), request.get("ExpressionAttributeNames")
                ),
            )
            responses[table] = [serialize(item) for item in found]
        return {"Responses": responses, "UnprocessedKeys": {}}
