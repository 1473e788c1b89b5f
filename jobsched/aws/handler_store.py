"""Operators' records about handler versions in the Leases table: the draining marks and the forced
deploy-checks (decision 0049).

Two items, each small and read whole with one GetItem: ``handlers#draining`` (``marks``: one entry per
marked version, ``<name>#<version>`` -> when and by whom) and ``handlers#deploy-checks`` (``checks``:
the last records, oldest first, as many as
:func:`~jobsched.ports.handlers.kept_checks` keeps). Writes are rare
(an administrator's call) and read-modify-write, conditional on the item's revision, so two writes
that race are both kept: the one refused reads again and writes over the other's result.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

from jobsched.aws.metering import Dynamo
from jobsched.core.errors import ConflictError
from jobsched.core.instants import to_iso
from jobsched.ports.handlers import kept_checks
from jobsched.ports.tables import ConditionFailed, Table

DRAINING_KEY = "handlers#draining"
DEPLOY_CHECKS_KEY = "handlers#deploy-checks"
_WRITE_ATTEMPTS = 5


def mark_key(name: str, version: int) -> str:
    return f"{name}#{version}"


class HandlerMarksStore:
    """The :class:`~jobsched.ports.handlers.HandlerMarks` of a deployment (the Leases table)."""

    def __init__(self, dynamodb: Any, table: str):
        self._db: Table = Dynamo.of(dynamodb)
        self._table = table

    def draining(self) -> set[tuple[str, int]]:
        marks = (self._read(DRAINING_KEY) or {}).get("marks") or {}
        out = set()
        for key in marks:
            name, _, version = str(key).rpartition("#")
            out.add((name, int(version)))
        return out

    def mark_draining(self, name: str, version: int, *, now: datetime, by: str) -> None:
        def change(item: dict[str, Any]) -> bool:
            marks = item.setdefault("marks", {})
            if mark_key(name, version) in marks:
                return False
            marks[mark_key(name, version)] = {"at": to_iso(now), "by": by}
            return True

        self._change(DRAINING_KEY, change)

    def unmark_draining(self, name: str, version: int) -> bool:
        def change(item: dict[str, Any]) -> bool:
            return item.setdefault("marks", {}).pop(mark_key(name, version), None) is not None

        return self._change(DRAINING_KEY, change)

    def record_deploy_check(self, record: dict[str, Any]) -> dict[str, Any]:
        def change(item: dict[str, Any]) -> bool:
            item["checks"] = kept_checks([*item.get("checks", []), dict(record)])
            return True

        self._change(DEPLOY_CHECKS_KEY, change)
        return dict(record)

    def deploy_checks(self) -> list[dict[str, Any]]:
        checks = (self._read(DEPLOY_CHECKS_KEY) or {}).get("checks") or []
        return [_plain(c) for c in reversed(checks)]

    def _read(self, key: str) -> dict[str, Any] | None:
        return self._db.get(self._table, {"lease_key": key}, consistent=True)

    def _change(self, key: str, change: Callable[[dict[str, Any]], bool]) -> bool:
        """Apply ``change`` to the item (created if absent) and write it if it says it changed, on the
        condition that nobody wrote it since it was read."""
        for _ in range(_WRITE_ATTEMPTS):
            item = self._read(key) or {"lease_key": key}
            revision = int(item.get("rev", 0))
            if not change(item):
                return False
            item["rev"] = revision + 1
            try:
                self._db.put(
                    self._table,
                    item,
                    condition="attribute_not_exists(lease_key) OR rev = :rev",
                    values={":rev": revision},
                )
                return True
            except ConditionFailed:
                continue
        raise ConflictError("the handler records are being changed by another request; retry")


def _plain(value: Any) -> Any:
    """A stored record as JSON values (DynamoDB gives numbers back as Decimal)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value
