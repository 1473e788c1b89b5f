"""An in-memory :class:`jobsched.ports.tables.Table`: DynamoDB's data plane for plain Python items.

It evaluates the stores' own condition, update, key-condition and filter expressions
(:mod:`jobsched.testing.expressions`), so every store of :mod:`jobsched.aws` runs on it unchanged and
keeps its conditional writes: a refused condition writes nothing and raises
:class:`~jobsched.ports.tables.ConditionFailed` with the stored item (a refused delete with ``None``,
as :class:`jobsched.aws.metering.Dynamo` asks DynamoDB for nothing more). Items are stored as DynamoDB
would give them back (numbers as ``Decimal``, sets as ``set``) and copied in and out.

Queries follow the tables' key schemas and indexes (:mod:`jobsched.runtime.resources`): a sparse index
holds only items with its keys, a ``KEYS_ONLY``/``INCLUDE`` index answers only the projected
attributes, items come in sort-key order (strings by their UTF-8 bytes), ``Limit`` counts items before
the filter, and the last evaluated key is given when more items remain. A consistent read of a global
index is refused, as DynamoDB refuses it.

TTL is by a clock: as on DynamoDB an expired item is still read until the TTL sweep removes it;
:meth:`InMemoryTables.sweep_ttl` is that sweep, run at the clock's instant (DynamoDB runs it within a
few days of expiry, so no code may rely on it running sooner).

Not modelled: the 1 MB page, throttling, transactions, streams, capacity (the meter counts requests,
not units).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from jobsched.aws.errors import refused
from jobsched.aws.sizing import Meter, deserialize, item_size, serialize
from jobsched.core.clock import Clock
from jobsched.ports.tables import ConditionFailed
from jobsched.runtime.resources import Index, TableSpec
from jobsched.testing.expressions import ExpressionError, apply_update, condition_holds

__all__ = ["InMemoryTables"]

MAX_ITEM_BYTES = 400 * 1024


def _normalize(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item as DynamoDB would store and return it (Decimal numbers, sets), a fresh copy."""
    return deserialize(serialize(item))


def _order(value: Any) -> Any:
    if isinstance(value, str):
        return (1, value.encode())
    if isinstance(value, bytes | bytearray):
        return (2, bytes(value))
    if isinstance(value, int | float | Decimal):
        return (0, Decimal(value))
    return (3, repr(value))


class InMemoryTables:
    """Every table of a deployment in memory, by physical name; ``specs`` maps each name to its
    :class:`~jobsched.runtime.resources.TableSpec`. ``clock`` drives :meth:`sweep_ttl`."""

    def __init__(
        self, specs: Mapping[str, TableSpec], *, clock: Clock | None = None, meter: Meter | None = None
    ):
        self.specs = dict(specs)
        self.clock = clock
        self.meter = meter or Meter()
        self._items: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {name: {} for name in self.specs}
        self._lock = threading.RLock()

    # --- helpers -----------------------------------------------------------------------------------

    def _table(
        self, table: str, operation: str, *, metered: bool = True
    ) -> tuple[TableSpec, dict[tuple[Any, ...], dict[str, Any]]]:
        if table not in self.specs:
            raise refused("ResourceNotFoundException", f"Requested resource not found: {table}", operation)
        if metered:  # the request is counted; capacity units are not estimated (the adapter's meter does)
            self.meter.record_dynamodb(operation, table=table)
        return self.specs[table], self._items[table]

    @staticmethod
    def _key_of(spec: TableSpec, item: Mapping[str, Any], operation: str) -> tuple[Any, ...]:
        key: list[Any] = []
        for part in (spec.partition, spec.sort):
            if part is None:
                continue
            value = item.get(part.name)
            ok = isinstance(value, str) if part.type == "S" else isinstance(value, int | Decimal)
            if value is None or not ok or isinstance(value, bool) or value == "":
                raise refused(
                    "ValidationException",
                    f"One or more parameter values were invalid: key attribute {part.name} is missing or "
                    f"not of type {part.type}",
                    operation,
                )
            key.append(value)
        return tuple(key)

    @staticmethod
    def _key_fields(spec: TableSpec, item: Mapping[str, Any]) -> dict[str, Any]:
        return {k.name: item[k.name] for k in (spec.partition, spec.sort) if k is not None and k.name in item}

    @staticmethod
    def _check_size(item: Mapping[str, Any], operation: str) -> None:
        if item_size(serialize(item)) > MAX_ITEM_BYTES:
            raise refused("ValidationException", "Item size has exceeded the maximum allowed size", operation)

    @staticmethod
    def _holds(
        condition: str | None,
        item: Mapping[str, Any] | None,
        names: Mapping[str, str] | None,
        values: Mapping[str, Any] | None,
        operation: str,
    ) -> bool:
        if not condition:
            return True
        try:
            return condition_holds(condition, item, names, _normalize(values or {}))
        except ExpressionError as exc:
            raise refused("ValidationException", str(exc), operation) from None

    @staticmethod
    def _project(item: dict[str, Any], attributes: Sequence[str] | None) -> dict[str, Any]:
        if not attributes:
            return item
        return {name: item[name] for name in attributes if name in item}

    # --- the Table port ----------------------------------------------------------------------------

    def put(
        self,
        table: str,
        item: Mapping[str, Any],
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None:
        with self._lock:
            spec, items = self._table(table, "PutItem")
            new = _normalize(item)
            key = self._key_of(spec, new, "PutItem")
            self._check_size(new, "PutItem")
            existing = items.get(key)
            if not self._holds(condition, existing, names, values, "PutItem"):
                raise ConditionFailed(copy.deepcopy(existing))
            items[key] = new

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
        with self._lock:
            spec, items = self._table(table, "UpdateItem")
            key_item = _normalize(key)
            item_key = self._key_of(spec, key_item, "UpdateItem")
            existing = items.get(item_key)
            if not self._holds(condition, existing, names, values, "UpdateItem"):
                raise ConditionFailed(copy.deepcopy(existing))
            base = copy.deepcopy(existing) if existing is not None else dict(key_item)
            try:
                updated = apply_update(expression, base, names, _normalize(values or {}))
            except ExpressionError as exc:
                raise refused("ValidationException", str(exc), "UpdateItem") from None
            if self._key_fields(spec, updated) != self._key_fields(spec, key_item):
                raise refused(
                    "ValidationException", "Cannot update attribute: it is part of the key", "UpdateItem"
                )
            updated = _normalize(updated)
            self._check_size(updated, "UpdateItem")
            items[item_key] = updated
            return copy.deepcopy(updated)

    def delete(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        condition: str | None = None,
        values: Mapping[str, Any] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None:
        with self._lock:
            spec, items = self._table(table, "DeleteItem")
            item_key = self._key_of(spec, _normalize(key), "DeleteItem")
            existing = items.get(item_key)
            if not self._holds(condition, existing, names, values, "DeleteItem"):
                raise ConditionFailed(None)
            items.pop(item_key, None)
            return existing

    def get(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        consistent: bool = False,
        attributes: Sequence[str] | None = None,
    ) -> dict[str, Any] | None:
        with self._lock:
            spec, items = self._table(table, "GetItem")
            found = items.get(self._key_of(spec, _normalize(key), "GetItem"))
            return self._project(copy.deepcopy(found), attributes) if found is not None else None

    def _index_keys(self, spec: TableSpec, index: Index | None) -> tuple[str, str | None]:
        if index is None:
            return spec.partition.name, spec.sort.name if spec.sort else None
        return index.partition.name, index.sort.name if index.sort else None

    def _index_projection(self, spec: TableSpec, index: Index | None, item: dict[str, Any]) -> dict[str, Any]:
        if index is None or index.projection == "ALL":
            return item
        names = {spec.partition.name, index.partition.name}
        names |= {k.name for k in (spec.sort, index.sort) if k}
        if index.projection == "INCLUDE":
            names |= set(index.include)
        return {k: v for k, v in item.items() if k in names}

    def _last_key(self, spec: TableSpec, index: Index | None, item: dict[str, Any]) -> dict[str, Any]:
        names = [spec.partition.name] + ([spec.sort.name] if spec.sort else [])
        if index is not None:
            names += [k.name for k in (index.partition, index.sort) if k]
        return {name: copy.deepcopy(item[name]) for name in dict.fromkeys(names)}

    def _query(
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
        with self._lock:
            spec, items = self._table(table, "Query")
            chosen: Index | None = None
            if index is not None:
                chosen = next((i for i in spec.indexes if i.name == index), None)
                if chosen is None:
                    raise refused(
                        "ValidationException", f"The table does not have the index {index}", "Query"
                    )
                if consistent:
                    raise refused(
                        "ValidationException",
                        "Consistent reads are not supported on global secondary indexes",
                        "Query",
                    )
            partition, sort = self._index_keys(spec, chosen)
            normalized = _normalize(values)
            try:
                matching = [
                    item
                    for item in items.values()
                    if partition in item
                    and (sort is None or sort in item)
                    and condition_holds(key_condition, item, names, normalized)
                ]
            except ExpressionError as exc:
                raise refused("ValidationException", str(exc), "Query") from None

            def position(item: Mapping[str, Any]) -> tuple[Any, ...]:
                order = [_order(item[sort])] if sort else []
                order += [_order(item.get(k.name)) for k in (spec.partition, spec.sort) if k]
                return tuple(order)

            matching.sort(key=position, reverse=not forward)
            if start_key:
                start = position(_normalize(start_key))
                matching = [i for i in matching if (position(i) > start if forward else position(i) < start)]
            last = None
            if limit and len(matching) > limit:
                matching = matching[:limit]
                last = self._last_key(spec, chosen, matching[-1])
            page = [self._index_projection(spec, chosen, copy.deepcopy(i)) for i in matching]
            if filter_expression:
                try:
                    page = [i for i in page if condition_holds(filter_expression, i, names, normalized)]
                except ExpressionError as exc:
                    raise refused("ValidationException", str(exc), "Query") from None
            return page, last

    def query_all(
        self, table: str, key_condition: str, values: Mapping[str, Any], **kwargs: Any
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            page, start = self._query(table, key_condition, values, start_key=start, **kwargs)
            out.extend(page)
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
        with self._lock:
            spec, items = self._table(table, "Scan")
            found = [copy.deepcopy(i) for i in items.values()]
        if index is not None:
            chosen = next((i for i in spec.indexes if i.name == index), None)
            if chosen is None:
                raise refused("ValidationException", f"The table does not have the index {index}", "Scan")
            keys = [k.name for k in (chosen.partition, chosen.sort) if k is not None]
            found = [self._index_projection(spec, chosen, i) for i in found if all(k in i for k in keys)]
        if filter_expression:
            normalized = _normalize(values or {})
            found = [i for i in found if condition_holds(filter_expression, i, None, normalized)]
        if projection:
            wanted = [name.strip() for name in projection.split(",")]
            found = [self._project(i, wanted) for i in found]
        return found

    def batch_write(self, table: str, items: Sequence[Mapping[str, Any]]) -> None:
        for start in range(0, len(items), 25):
            chunk = [_normalize(i) for i in items[start : start + 25]]
            with self._lock:
                spec, stored = self._table(table, "BatchWriteItem")
                keys = [self._key_of(spec, i, "BatchWriteItem") for i in chunk]
                if len(set(keys)) != len(keys):
                    raise refused(
                        "ValidationException",
                        "Provided list of item keys contains duplicates",
                        "BatchWriteItem",
                    )
                for item in chunk:
                    self._check_size(item, "BatchWriteItem")
                for key, item in zip(keys, chunk, strict=True):
                    stored[key] = item

    def batch_get(
        self,
        table: str,
        keys: Sequence[Mapping[str, Any]],
        *,
        consistent: bool = False,
        attributes: Sequence[str] | None = None,
        metered: bool = True,
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for start in range(0, len(keys), 100):
            with self._lock:
                spec, stored = self._table(table, "BatchGetItem", metered=metered)
                wanted = [
                    self._key_of(spec, _normalize(k), "BatchGetItem") for k in keys[start : start + 100]
                ]
                if len(set(wanted)) != len(wanted):
                    raise refused(
                        "ValidationException",
                        "Provided list of item keys contains duplicates",
                        "BatchGetItem",
                    )
                out.extend(self._project(copy.deepcopy(stored[k]), attributes) for k in wanted if k in stored)
        return out

    # --- boto3-shaped calls, for tests that read and write tables as a DynamoDB client -------------

    def create_table(self, TableName: str, **kwargs: Any) -> dict[str, Any]:
        """A table of one of jobsched's specs (:data:`jobsched.runtime.resources.TABLES`), recognised
        by the arguments :meth:`~jobsched.runtime.resources.TableSpec.create_table_kwargs` gives for it
        (as the tests' ``provision`` creates a second deployment beside the first). Any other schema
        is refused: the fake evaluates only the key schemas and indexes it knows."""
        from jobsched.runtime.resources import TABLES

        wanted = {"TableName": TableName, **kwargs}
        spec = next((s for s in TABLES if s.create_table_kwargs(TableName) == wanted), None)
        with self._lock:
            if TableName in self.specs:
                raise refused("ResourceInUseException", f"Table already exists: {TableName}", "CreateTable")
            if spec is None:
                raise refused(
                    "ValidationException",
                    f"not a schema of jobsched.runtime.resources: {TableName}",
                    "CreateTable",
                )
            self.specs[TableName] = spec
            self._items[TableName] = {}
        return {"TableDescription": {"TableName": TableName, "TableStatus": "ACTIVE"}}

    def get_item(
        self,
        TableName: str,
        Key: Mapping[str, Any],
        ConsistentRead: bool = False,
        **_: Any,
    ) -> dict[str, Any]:
        found = self.get(TableName, deserialize(Key), consistent=ConsistentRead)
        return {"Item": serialize(found)} if found is not None else {}

    def put_item(self, TableName: str, Item: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
        condition, names, values = _expressions(kwargs)
        try:
            self.put(TableName, deserialize(Item), condition=condition, names=names, values=values)
        except ConditionFailed as failed:
            raise _check_failed(failed, "PutItem") from None
        return {}

    def update_item(
        self,
        TableName: str,
        Key: Mapping[str, Any],
        UpdateExpression: str,
        ReturnValues: str = "NONE",
        **kwargs: Any,
    ) -> dict[str, Any]:
        condition, names, values = _expressions(kwargs)
        try:
            new = self.update(
                TableName, deserialize(Key), UpdateExpression, condition=condition, names=names, values=values
            )
        except ConditionFailed as failed:
            raise _check_failed(failed, "UpdateItem") from None
        return {"Attributes": serialize(new)} if ReturnValues == "ALL_NEW" else {}

    def delete_item(
        self, TableName: str, Key: Mapping[str, Any], ReturnValues: str = "NONE", **kwargs: Any
    ) -> dict[str, Any]:
        """As DynamoDB: a missing item is no error; a refused condition keeps the item."""
        condition, names, values = _expressions(kwargs)
        try:
            old = self.delete(TableName, deserialize(Key), condition=condition, names=names, values=values)
        except ConditionFailed as failed:
            raise _check_failed(failed, "DeleteItem") from None
        return {"Attributes": serialize(old)} if ReturnValues == "ALL_OLD" and old is not None else {}

    def scan(
        self,
        TableName: str,
        Select: str | None = None,
        FilterExpression: str | None = None,
        ProjectionExpression: str | None = None,
        ExpressionAttributeValues: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        values = deserialize(ExpressionAttributeValues or {})
        found = self.scan_all(
            TableName, projection=ProjectionExpression, filter_expression=FilterExpression, values=values
        )
        answer: dict[str, Any] = {"Count": len(found), "ScannedCount": len(found)}
        if Select != "COUNT":
            answer["Items"] = [serialize(i) for i in found]
        return answer

    def query(self, *args: Any, **kwargs: Any) -> Any:
        """The :class:`~jobsched.ports.tables.Table` query (``table, key_condition, values``), or
        boto3's shape when called with ``TableName=``."""
        if "TableName" not in kwargs:
            return self._query(*args, **kwargs)
        _, names, values = _expressions(kwargs)
        start = kwargs.get("ExclusiveStartKey")
        items, last = self._query(
            kwargs["TableName"],
            kwargs["KeyConditionExpression"],
            values or {},
            names=names,
            index=kwargs.get("IndexName"),
            limit=kwargs.get("Limit"),
            forward=kwargs.get("ScanIndexForward", True),
            start_key=deserialize(start) if start else None,
            filter_expression=kwargs.get("FilterExpression"),
            consistent=kwargs.get("ConsistentRead", False),
        )
        answer: dict[str, Any] = {"Items": [serialize(i) for i in items], "Count": len(items)}
        if last is not None:
            answer["LastEvaluatedKey"] = serialize(last)
        return answer

    # --- for tests ---------------------------------------------------------------------------------

    def metered(self, meter: Meter) -> InMemoryTables:
        """The same tables (same items, same lock), counting requests on ``meter`` (what
        :func:`jobsched.aws.metering.dynamo_for` asks for when it is given a meter)."""
        view = copy.copy(self)
        view.meter = meter
        return view

    def sweep_ttl(self, now: datetime | None = None) -> int:
        """Remove the items whose TTL attribute (epoch seconds) is before ``now`` (default: the
        clock's instant), as DynamoDB's TTL sweep eventually does; returns how many were removed."""
        if now is None:
            if self.clock is None:
                raise ValueError("sweep_ttl needs an instant or a clock")
            now = self.clock.now()
        epoch = Decimal(int(now.timestamp()))
        removed = 0
        with self._lock:
            for name, spec in self.specs.items():
                attribute = spec.ttl_attribute
                if not attribute:
                    continue
                stored = self._items[name]
                for key in [k for k, i in stored.items() if _expired(i.get(attribute), epoch)]:
                    del stored[key]
                    removed += 1
        return removed

    def items(self, table: str) -> list[dict[str, Any]]:
        """Every item of ``table`` (copies, in no particular order) -- for assertions."""
        with self._lock:
            return [copy.deepcopy(i) for i in self._items[table].values()]


def _expressions(
    kwargs: Mapping[str, Any],
) -> tuple[str | None, dict[str, str] | None, dict[str, Any] | None]:
    values = kwargs.get("ExpressionAttributeValues")
    return (
        kwargs.get("ConditionExpression"),
        kwargs.get("ExpressionAttributeNames"),
        deserialize(values) if values else None,
    )


def _check_failed(failed: ConditionFailed, operation: str) -> Exception:
    error: dict[str, Any] = {
        "Code": "ConditionalCheckFailedException",
        "Message": "The conditional request failed",
    }
    response: dict[str, Any] = {"Error": error}
    if failed.existing is not None:
        response["Item"] = serialize(failed.existing)
    from jobsched.aws.errors import AwsRefused

    return AwsRefused(response, operation)


def _expired(value: Any, epoch: Decimal) -> bool:
    return isinstance(value, int | Decimal) and not isinstance(value, bool) and Decimal(value) < epoch
