"""The item store every jobsched store is written on: DynamoDB's data plane for plain Python items.

Items are dicts of str, int, float, Decimal, bool, None, dict and list. Expressions are DynamoDB's
(condition, update, key condition, filter), with ``names`` (``#n``) and ``values`` (``:v``) as plain
Python. What the guarantees rest on, and what every implementation keeps:

* a write with a ``condition`` happens only when the condition holds on the stored item (absent item:
  every attribute is missing); otherwise it raises :class:`ConditionFailed` carrying the stored item
  (``None`` when there is none), and writes nothing;
* :meth:`Table.update` returns the new image; :meth:`Table.delete` the old one;
* a ``query`` returns items in sort-key order (``forward=False``: reversed), at most ``limit`` of them
  before the filter is applied, with the last evaluated key to continue from;
* an item past its TTL attribute is still read until the table's TTL sweep removes it (DynamoDB
  removes it within days): code that cares compares the TTL attribute with its clock.

:class:`jobsched.aws.metering.Dynamo` is the real implementation (metered), and
:class:`jobsched.testing.InMemoryTables` the fake.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable


class ConditionFailed(Exception):
    """A conditional write was refused; ``existing`` is the item as stored (when DynamoDB returned it)."""

    def __init__(self, existing: dict[str, Any] | None):
        super().__init__("conditional check failed")
        self.existing = existing


@runtime_checkable
class Table(Protocol):
    """Conditional writes and key-ordered reads over the deployment's tables (named per call)."""

    meter: Any

    def put(
        self,
        table: str,
        item: Mapping[str, Any],
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> None: ...

    def update(
        self,
        table: str,
        key: Mapping[str, Any],
        expression: str,
        *,
        condition: str | None = None,
        names: Mapping[str, str] | None = None,
        values: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...

    def delete(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        condition: str | None = None,
        values: Mapping[str, Any] | None = None,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any] | None: ...

    def get(
        self,
        table: str,
        key: Mapping[str, Any],
        *,
        consistent: bool = False,
        attributes: Sequence[str] | None = None,
    ) -> dict[str, Any] | None: ...

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
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None]: ...

    def query_all(
        self, table: str, key_condition: str, values: Mapping[str, Any], **kwargs: Any
    ) -> list[dict[str, Any]]: ...

    def scan_all(
        self,
        table: str,
        *,
        projection: str | None = None,
        filter_expression: str | None = None,
        values: Mapping[str, Any] | None = None,
        index: str | None = None,
    ) -> list[dict[str, Any]]: ...

    def batch_write(self, table: str, items: Sequence[Mapping[str, Any]]) -> None: ...

    def batch_get(
        self,
        table: str,
        keys: Sequence[Mapping[str, Any]],
        *,
        consistent: bool = False,
        attributes: Sequence[str] | None = None,
        metered: bool = True,
    ) -> list[dict[str, Any]]: ...
