"""Per-chunk records: the checkpoint a retried chunk resumes from, and the chunk's output once done.

One item per (execution, chunk index) in the Leases table, key ``chunk#<execution name>#<index>``,
expiring with the table's TTL. Why the Leases table and not a child item of the run in the Runs
table: listings of a job's runs query the run partition and the benchmark scans the Runs table, so
child items there would show up as runs; the Leases table holds only keyed, expiring records, and
it has no index, so a chunk write costs its item and nothing more.

Keyed by execution name (not run id), so a replayed run (a new execution) starts from fresh records.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from jobsched.aws.metering import ConditionFailed
from jobsched.core.models import to_iso
from jobsched.ports.tables import Table

#: Chunk records outlive any execution (the ASL's task timeout is 6 h, retries add minutes).
CHUNK_RECORD_TTL = timedelta(days=7)
KEY_PREFIX = "chunk#"


def chunk_key(execution: str, index: int) -> dict[str, str]:
    return {"lease_key": f"{KEY_PREFIX}{execution}#{index}"}


class ChunkStore:
    """Reads and writes chunk records (metered client and table name injected)."""

    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table

    def get(self, execution: str, index: int) -> dict[str, Any]:
        """The chunk's record (``{}`` when nothing was stored yet); strongly consistent."""
        return plain(self.dynamo.get(self.table, chunk_key(execution, index), consistent=True) or {})

    def save_checkpoint(self, execution: str, index: int, value: Any, now: datetime) -> None:
        """Store the chunk's checkpoint (refused once the chunk is done: a late writer cannot undo it)."""
        try:
            self.dynamo.update(
                self.table,
                chunk_key(execution, index),
                "SET checkpoint = :c, updated_at = :now, expires_at = :exp",
                condition="attribute_not_exists(done_at)",
                values={":c": value, ":now": to_iso(now), ":exp": _expiry(now)},
            )
        except ConditionFailed:
            pass  # already done: the checkpoint no longer matters

    def mark_done(
        self, execution: str, index: int, now: datetime, output: Any = None, output_ref: str | None = None
    ) -> bool:
        """Record the chunk as done with its output (inline or an S3 key). False if it already was."""
        sets = ["done_at = :now", "expires_at = :exp"]
        values: dict[str, Any] = {":now": to_iso(now), ":exp": _expiry(now)}
        if output_ref is not None:
            sets.append("output_ref = :ref")
            values[":ref"] = output_ref
        elif output is not None:
            sets.append("#output = :out")
            values[":out"] = output
        try:
            self.dynamo.update(
                self.table,
                chunk_key(execution, index),
                "SET " + ", ".join(sets),
                condition="attribute_not_exists(done_at)",
                names={"#output": "output"} if ":out" in values else None,
                values=values,
            )
        except ConditionFailed:
            return False
        return True

    def outputs(self, execution: str, total: int) -> list[dict[str, Any]]:
        """The records of chunks ``0..total-1`` in index order (``{}`` for a chunk with no record)."""
        keys = [chunk_key(execution, i) for i in range(total)]
        found = {i["lease_key"]: i for i in self.dynamo.batch_get(self.table, keys, consistent=True)}
        return [plain(found.get(k["lease_key"], {})) for k in keys]


def plain(value: Any) -> Any:
    """DynamoDB numbers come back as Decimal; hand user code the ints and floats it stored."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _expiry(now: datetime) -> int:
    return int((now + CHUNK_RECORD_TTL).timestamp())
