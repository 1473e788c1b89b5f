"""Every DynamoDB and SQS call of the run pipeline goes through here, so what AWS would bill is counted.

:class:`Dynamo` wraps a boto3 DynamoDB client: it converts plain Python items (str, int, float, bool,
dict, list) to and from the wire format, adds ``ReturnConsumedCapacity="TOTAL"`` and hands each
response to a :class:`Meter`.

Why the meter *estimates* instead of trusting the response: moto reports a constant 1.0/0.5 unit per
call whatever the item size and leaves out global secondary indexes, so its figures cannot price a
run. The meter therefore computes capacity from item sizes with the documented DynamoDB rules and
keeps the reported figure beside it (``reported_*``; on real AWS the two should agree):

* item size = sum of UTF-8 attribute name lengths + value sizes (strings: UTF-8 bytes; numbers:
  ~1 byte per 2 significant digits + 1; booleans/null: 1; lists/maps: 3 + elements + 1 per element);
* write: ``ceil(size / 1 KB)`` WRU for the item; a failed conditional write is billed the same;
* each GSI whose projection the write touches costs ``ceil(projected size / 1 KB)`` more; a write
  that *changes* a GSI key costs two (delete old entry + put new one), one that removes it one.
  For an update the old image is not known: a key named in the update expression counts as a change
  (2) when the new image has it, a removal (1) when it does not; a put counts as a new item;
* BatchWriteItem: each item put is billed like a PutItem (``ceil(size / 1 KB)`` + its index entries);
  items DynamoDB left unprocessed are not billed (they are retried, and billed then);
* reads: ``ceil(size / 4 KB)`` units per item, halved when eventually consistent; a query sums the
  sizes of the items it returns before rounding.
* SQS: each request is billed per started 64 KiB of payload; a batch of ten 1 KB messages is one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from jobsched.aws.errors import AwsRefused, aws_call, is_sdk_client, refused
from jobsched.aws.sizing import (  # noqa: F401  (re-exported: callers import them from here)
    Meter,
    deserialize,
    item_size,
    read_units,
    serialize,
    to_dynamo_value,
    write_units,
)
from jobsched.ports.tables import ConditionFailed, Table
from jobsched.runtime.resources import TableSpec

__all__ = ["ConditionFailed", "Dynamo", "Meter", "dynamo_for", "table_specs", "unprocessed_error"]


_NAME_TOKEN = re.compile(r"#?[A-Za-z_][A-Za-z0-9_]*")


def _expression_names(expression: str, names: Mapping[str, str] | None) -> set[str]:
    """Attribute names an update expression mentions (``#n`` placeholders resolved)."""
    out = set()
    for token in _NAME_TOKEN.findall(expression):
        out.add(names.get(token, token) if token.startswith("#") and names else token)
    return out


class Dynamo:
    """A metered DynamoDB client for plain-Python items: the real :class:`jobsched.ports.tables.Table`.
    ``specs`` maps physical table names to their :class:`TableSpec` so index writes can be estimated."""

    @classmethod
    def of(cls, client_or_table: Any) -> Any:
        """``client_or_table`` itself when it is a :class:`~jobsched.ports.tables.Table` (this adapter
        or a fake), else an unmetered-by-anyone adapter (its own meter) over that boto3 client."""
        if not is_sdk_client(client_or_table) and isinstance(client_or_table, Table):
            return client_or_table
        return cls(client_or_table, {})

    def __init__(self, client: Any, specs: Mapping[str, TableSpec], meter: Meter | None = None):
        self.client = client
        self.specs = dict(specs)
        self.meter = meter or Meter()
        self.sleep = time.sleep  # the backoff between retries of unprocessed batch items

    # --- estimation --------------------------------------------------------------------------------

    def _index_units_for_item(self, table: str, wire: Mapping[str, Any], size: int) -> int:
        spec = self.specs.get(table)
        units = 0
        if spec is None:
            return units
        for index in spec.indexes:
            if all(k.name in wire for k in (index.partition, index.sort) if k):
                units += write_units(self._projected_size(spec, index, wire, size))
        return units

    def _put_units(self, table: str, wire: Mapping[str, Any]) -> int:
        """What a put of ``wire`` (a new item) is billed: the item and its index entries."""
        size = item_size(wire)
        return write_units(size) + self._index_units_for_item(table, wire, size)

    @staticmethod
    def _projected_size(spec: TableSpec, index: Any, wire: Mapping[str, Any], size: int) -> int:
        if index.projection == "ALL":
            return size
        names = {spec.partition.name, index.partition.name}
        names |= {k.name for k in (spec.sort, index.sort) if k}
        names |= set(index.include)
        return item_size({k: v for k, v in wire.items() if k in names}) + 100  # +100: index overhead

    # --- calls -------------------------------------------------------------------------------------

    def put(
        self,
        table: str,
        item: Mapping[str, Any],
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        """PutItem; on a failed condition raise :class:`ConditionFailed` carrying the stored item."""
        wire = serialize(item)
        size = item_size(wire)
        kwargs: dict[str, Any] = {"TableName": table, "Item": wire, "ReturnConsumedCapacity": "TOTAL"}
        _add_expressions(kwargs, condition, names, values, return_old_on_failure=True)
        try:
            response = aws_call(self.client.put_item, **kwargs)
        except AwsRefused as exc:
            if exc.code != "ConditionalCheckFailedException":
                raise
            self.meter.record_dynamodb("PutItem", table=table, wcu=write_units(size), response=exc.response)
            old = exc.response.get("Item")
            raise ConditionFailed(deserialize(old) if old else None) from None
        self.meter.record_dynamodb(
            "PutItem", table=table, wcu=self._put_units(table, wire), response=response
        )
        self.meter.record_items([wire])

    def update(
        self,
        table: str,
        key: Mapping[str, Any],
        expression: str,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """UpdateItem returning the new image; :class:`ConditionFailed` carries the stored item."""
        kwargs: dict[str, Any] = {
            "TableName": table,
            "Key": serialize(key),
            "UpdateExpression": expression,
            "ReturnValues": "ALL_NEW",
            "ReturnConsumedCapacity": "TOTAL",
        }
        _add_expressions(kwargs, condition, names, values, return_old_on_failure=True)
        try:
            response = aws_call(self.client.update_item, **kwargs)
        except AwsRefused as exc:
            if exc.code != "ConditionalCheckFailedException":
                raise
            old = exc.response.get("Item")
            self.meter.record_dynamodb(
                "UpdateItem",
                table=table,
                wcu=write_units(item_size(old) if old else 0),
                response=exc.response,
            )
            raise ConditionFailed(deserialize(old) if old else None) from None
        wire = response.get("Attributes", {})
        size = item_size(wire)
        self.meter.record_dynamodb(
            "UpdateItem",
            table=table,
            wcu=write_units(size) + self._index_units_for_update(table, wire, size, expression, names),
            response=response,
        )
        self.meter.record_items([wire])
        return deserialize(wire)

    def _index_units_for_update(
        self, table: str, wire: Mapping[str, Any], size: int, expression: str, names: Mapping[str, str] | None
    ) -> int:
        spec = self.specs.get(table)
        touched = _expression_names(expression, names)
        units = 0
        if spec is None:
            return units
        for index in spec.indexes:
            keys = [k.name for k in (index.partition, index.sort) if k]
            in_index = all(k in wire for k in keys)
            projected = write_units(self._projected_size(spec, index, wire, size)) if in_index else 1
            if any(k in touched for k in keys):
                units += 2 * projected if in_index else 1
            elif in_index and (index.projection == "ALL" or touched & set(index.include)):
                units += projected
        return units

    def delete(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        condition: str | None = None,
        values: Mapping[str, Any] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "Key": serialize(key),
            "ReturnValues": "ALL_OLD",
            "ReturnConsumedCapacity": "TOTAL",
        }
        _add_expressions(kwargs, condition, names, values)
        try:
            response = aws_call(self.client.delete_item, **kwargs)
        except AwsRefused as exc:
            if exc.code != "ConditionalCheckFailedException":
                raise
            self.meter.record_dynamodb("DeleteItem", table=table, wcu=1, response=exc.response)
            raise ConditionFailed(None) from None
        wire = response.get("Attributes")
        size = item_size(wire) if wire else 0
        index_units = self._index_units_for_item(table, wire, size) if wire else 0
        self.meter.record_dynamodb(
            "DeleteItem", table=table, wcu=write_units(size) + index_units, response=response
        )
        self.meter.record_items([wire] if wire else [])
        return deserialize(wire) if wire else None

    def get(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        consistent: bool = False,
        attributes: Sequence[str] | None = None,
    ) -> dict[str, Any] | None:
        """GetItem; with ``attributes``, only those come back (a ``ProjectionExpression``).

        A projection saves bytes on the wire, not read units: DynamoDB bills the whole item. The
        meter sees only what came back, so a projected read is counted as the unit minimum (1 RRU
        consistent, 0.5 eventually consistent) -- exact for items up to 4 KB."""
        kwargs: dict[str, Any] = {
            "TableName": table,
            "Key": serialize(key),
            "ConsistentRead": consistent,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if attributes:
            kwargs.update(_projection(attributes))
        response = aws_call(self.client.get_item, **kwargs)
        wire = response.get("Item")
        self.meter.record_dynamodb(
            "GetItem",
            table=table,
            rcu=read_units(item_size(wire) if wire else 0, consistent),
            response=response,
        )
        self.meter.record_items([wire] if wire else [])
        return deserialize(wire) if wire else None

    def query(
        self,
        table: str,
        key_condition: str,
        values: Mapping[str, Any],
        *,
        names: Mapping[str, str] | None = None,
        index: str | None = None,
        limit: int | None = None,
        forward: bool = True,
        start_key: Mapping[str, Any] | None = None,
        filter_expression: str | None = None,
        consistent: bool = False,
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """One page of a Query: (items, last evaluated key or None)."""
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": key_condition,
            "ExpressionAttributeValues": serialize(values),
            "ScanIndexForward": forward,
            "ReturnConsumedCapacity": "TOTAL",
            "ConsistentRead": consistent,
        }
        if names:
            kwargs["ExpressionAttributeNames"] = dict(names)
        if index:
            kwargs["IndexName"] = index
        if limit:
            kwargs["Limit"] = limit
        if start_key:
            kwargs["ExclusiveStartKey"] = serialize(start_key)
        if filter_expression:
            kwargs["FilterExpression"] = filter_expression
        response = aws_call(self.client.query, **kwargs)
        wires = response.get("Items", [])
        # A filter does not reduce the read cost: DynamoDB bills what it read; we only see what it kept.
        self.meter.record_dynamodb(
            "Query",
            table=table,
            rcu=read_units(sum(item_size(w) for w in wires), consistent),
            response=response,
        )
        self.meter.record_items(wires)
        last = response.get("LastEvaluatedKey")
        return [deserialize(w) for w in wires], deserialize(last) if last else None

    def query_all(
        self, table: str, key_condition: str, values: Mapping[str, Any], **kwargs: Any
    ) -> list[dict]:
        """Every item of a Query, page after page (``kwargs`` as :meth:`query`, without ``start_key``)."""
        out: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            items, start = self.query(table, key_condition, values, start_key=start, **kwargs)
            out.extend(items)
            if start is None:
                return out

    def scan_all(
        self,
        table: str,
        *,
        projection: str | None = None,
        filter_expression: str | None = None,
        values: Mapping[str, Any] | None = None,
        index: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every item of a table, page after page (eventually consistent Scan, metered per page); with
        ``filter_expression``, only the items it keeps (a filter does not reduce what is read); with
        ``index``, the items of that index (a sparse index: only the items that carry its keys)."""
        kwargs: dict[str, Any] = {"TableName": table}
        if index:
            kwargs["IndexName"] = index
        if projection:
            kwargs["ProjectionExpression"] = projection
        if filter_expression:
            kwargs["FilterExpression"] = filter_expression
        if values:
            kwargs["ExpressionAttributeValues"] = serialize(values)
        out: list[dict[str, Any]] = []
        while True:
            response = aws_call(self.client.scan, ReturnConsumedCapacity="TOTAL", **kwargs)
            wires = response.get("Items", [])
            size = sum(item_size(w) for w in wires)
            self.meter.record_dynamodb("Scan", rcu=read_units(size, False), response=response)
            self.meter.record_items(wires)
            out.extend(deserialize(w) for w in wires)
            if "LastEvaluatedKey" not in response:
                return out
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def batch_write(self, table: str, items: Sequence[Mapping[str, Any]]) -> None:
        """BatchWriteItem puts in chunks of 25, retrying unprocessed items with a short backoff.

        Unconditional puts: meant for items whose key nobody else writes (feed items), so a retry
        that repeats a put is harmless."""
        for start in range(0, len(items), 25):
            wires = [serialize(i) for i in items[start : start + 25]]
            pending: dict[str, Any] = {table: [{"PutRequest": {"Item": w}} for w in wires]}
            for attempt in range(8):
                if attempt:  # a backoff between tries, none after the last
                    self.sleep(min(1.0, 0.05 * 2 ** (attempt - 1)))
                response = aws_call(
                    self.client.batch_write_item, RequestItems=pending, ReturnConsumedCapacity="TOTAL"
                )
                left = (response.get("UnprocessedItems") or {}).get(table, [])
                done = [r["PutRequest"]["Item"] for r in pending[table] if r not in left]
                wcu = sum(self._put_units(table, w) for w in done)
                self.meter.record_dynamodb("BatchWriteItem", wcu=wcu, response=response, table=table)
                self.meter.record_items(done)
                if not left:
                    break
                pending = {table: left}
            else:
                raise unprocessed_error("BatchWriteItem", table, "items")

    def batch_get(
        self,
        table: str,
        keys: Sequence[Mapping[str, Any]],
        *,
        consistent: bool = False,
        attributes: Sequence[str] | None = None,
        metered: bool = True,
    ) -> list[dict[str, Any]]:
        """BatchGetItem in chunks of 100, retrying unprocessed keys; order of the result is not kept.

        With ``attributes``, only those come back (a ``ProjectionExpression``: name the key attributes
        too, to tell the items apart). ``metered=False`` leaves the recording to the caller, who
        attributes each item's read to whom it was for (DynamoDB bills a batch per item, as that many
        GetItems)."""
        out: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {
                "Keys": [serialize(k) for k in keys[start : start + 100]],
                "ConsistentRead": consistent,
            }
            if attributes:
                request.update(_projection(attributes))
            pending: dict[str, Any] = {table: request}
            for _ in range(8):
                response = aws_call(
                    self.client.batch_get_item, RequestItems=pending, ReturnConsumedCapacity="TOTAL"
                )
                wires = response.get("Responses", {}).get(table, [])
                if metered:
                    rcu = sum(read_units(item_size(w), consistent) for w in wires)
                    self.meter.record_dynamodb("BatchGetItem", rcu=rcu, response=response, table=table)
                self.meter.record_items(wires)
                out.extend(deserialize(w) for w in wires)
                pending = response.get("UnprocessedKeys") or {}
                if not pending:
                    break
            else:
                raise unprocessed_error("BatchGetItem", table, "keys")
        return out


def _projection(attributes: Sequence[str]) -> dict[str, Any]:
    """A ``ProjectionExpression`` of ``attributes`` with its ``ExpressionAttributeNames`` (placeholders,
    so reserved words such as ``state`` can be projected)."""
    placeholders = {f"#p{i}": name for i, name in enumerate(attributes)}
    return {"ProjectionExpression": ", ".join(placeholders), "ExpressionAttributeNames": placeholders}


def unprocessed_error(operation: str, table: str, what: str) -> AwsRefused:
    """A batch call that kept leaving work unprocessed (DynamoDB under throttling): raised as an
    :class:`~jobsched.aws.errors.AwsRefused` (a ``ClientError`` too) so every caller treats it like the
    throttling it is (e.g. the API's immediate
    dispatch leaves the stored job to the next tick instead of failing the request)."""
    message = f"{operation} on {table} left {what} unprocessed after 8 tries"
    return refused("UnprocessedItems", message, operation)


def table_specs(settings: Any) -> dict[str, TableSpec]:
    """Physical table name -> spec, for the tables a :class:`jobsched.runtime.settings.Settings` names."""
    from jobsched.runtime import resources as r

    pairs = [
        (settings.jobs_table, r.JOBS_TABLE),
        (settings.runs_table, r.RUNS_TABLE),
        (settings.leases_table, r.LEASES_TABLE),
        (settings.idempotency_table, r.IDEMPOTENCY_TABLE),
    ]
    return {name: spec for name, spec in pairs if name}


def dynamo_for(settings: Any, client: Any, meter: Meter | None = None) -> Any:
    """A metered :class:`Dynamo` over ``client`` that knows the deployment's tables; a ``client`` that
    is a :class:`~jobsched.ports.tables.Table` already (an in-memory fake) is returned as it is, counting
    on ``meter`` when it can (``metered``)."""
    if not is_sdk_client(client) and isinstance(client, Table):
        metered = getattr(client, "metered", None)
        return metered(meter) if meter is not None and metered is not None else client
    return Dynamo(client, table_specs(settings), meter)


def _add_expressions(
    kwargs: dict[str, Any],
    condition: str | None,
    names: Mapping[str, str] | None,
    values: Mapping[str, Any] | None,
    *,
    return_old_on_failure: bool = False,
) -> None:
    """Add a write's condition and its expression names/values to the request ``kwargs``; with
    ``return_old_on_failure`` a failed condition returns the stored item (no extra read to learn why)."""
    if condition:
        kwargs["ConditionExpression"] = condition
        if return_old_on_failure:
            kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    if names:
        kwargs["ExpressionAttributeNames"] = dict(names)
    if values:
        kwargs["ExpressionAttributeValues"] = serialize(values)
