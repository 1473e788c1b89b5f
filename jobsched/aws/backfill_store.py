"""Backfill records in the Runs table (docs/decisions/0029-async-backfill.md).

Two items per asynchronous backfill, under the partition ``backfill#<job id>`` (no run's partition:
a job's run listing never sees them): ``<backfill id>``, the small progress record that every slice
updates, and ``<backfill id>#job``, the job as it was when the backfill was requested (written once,
read by each delivery; the runs carry that snapshot in their messages, as a synchronous backfill's
do). Both carry the run retention's ``expires_at``.
"""

from __future__ import annotations

from typing import Any

from jobsched.aws.metering import ConditionFailed
from jobsched.core.backfills import PARTITION_PREFIX, SNAPSHOT_SUFFIX, Backfill, BackfillState
from jobsched.core.errors import NotFoundError
from jobsched.core.models import Job
from jobsched.ports.tables import Table


def _key(job_id: str, backfill_id: str) -> dict[str, str]:
    return {"job_id": PARTITION_PREFIX + job_id, "run_key": backfill_id}


class BackfillStore:
    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table

    def create(self, record: Backfill, job: Job) -> tuple[Backfill, bool]:
        """Store the job snapshot, then the record unless one with its id exists: ``(record, True)``,
        or ``(stored record, False)`` (a repeated request with the same ``Idempotency-Key``)."""
        existing = self.dynamo.get(self.table, _key(record.job_id, record.id), consistent=True)
        if existing is not None:
            return Backfill.from_item(existing), False
        snapshot = {
            **_key(record.job_id, record.id + SNAPSHOT_SUFFIX),
            "tenant": record.tenant,
            "job": job.to_item(),
            **({"expires_at": record.expires_at} if record.expires_at is not None else {}),
        }
        self.dynamo.put(self.table, snapshot)
        try:
            self.dynamo.put(self.table, record.to_item(), condition="attribute_not_exists(run_key)")
        except ConditionFailed as failed:
            stored = failed.existing or self.dynamo.get(self.table, _key(record.job_id, record.id))
            if stored is None:
                raise
            return Backfill.from_item(stored), False
        return record, True

    def get(self, tenant: str, job_id: str, backfill_id: str, *, consistent: bool = True) -> Backfill:
        """The record; another tenant's (or none) is :class:`NotFoundError`."""
        item = None
        if not backfill_id.endswith(SNAPSHOT_SUFFIX):
            item = self.dynamo.get(self.table, _key(job_id, backfill_id), consistent=consistent)
        if item is None or item.get("tenant") != tenant:
            raise NotFoundError(f"backfill {backfill_id[:80]} of job {job_id[:80]} not found")
        return Backfill.from_item(item)

    def job_snapshot(self, job_id: str, backfill_id: str) -> Job | None:
        item = self.dynamo.get(self.table, _key(job_id, backfill_id + SNAPSHOT_SUFFIX), consistent=True)
        return Job.from_item(item["job"]) if item is not None else None

    def record(self, before: Backfill, after: Backfill) -> bool:
        """Write ``after`` if the stored record is still ``before``'s progress (same ``done``, running):
        False when another delivery recorded this slice first."""
        values: dict[str, Any] = {
            ":done": after.done,
            ":created": after.created,
            ":existing": after.existing,
            ":sent": after.sent,
            ":state": str(after.state),
            ":updated": after.to_item()["updated_at"],
            ":was": before.done,
            ":running": str(BackfillState.RUNNING),
        }
        expression = (
            "SET bf_done = :done, bf_created = :created, bf_existing = :existing, bf_sent = :sent, "
            "bf_state = :state, updated_at = :updated"
        )
        if after.finished_at is not None:
            expression += ", finished_at = :finished"
            values[":finished"] = after.to_item()["finished_at"]
        try:
            self.dynamo.update(
                self.table,
                _key(before.job_id, before.id),
                expression,
                condition="bf_done = :was AND bf_state = :running",
                values=values,
            )
        except ConditionFailed:
            return False
        return True

    def touch(self, record: Backfill, updated_at: str) -> bool:
        """Mark a resumed record as moving again (its ``updated_at``), if it is still running."""
        try:
            self.dynamo.update(
                self.table,
                _key(record.job_id, record.id),
                "SET updated_at = :u",
                condition="bf_state = :running",
                values={":u": updated_at, ":running": str(BackfillState.RUNNING)},
            )
        except ConditionFailed:
            return False
        return True

    def fail(self, record: Backfill, error: str, at: str) -> bool:
        """Stop a running backfill for good with ``error``."""
        try:
            self.dynamo.update(
                self.table,
                _key(record.job_id, record.id),
                "SET bf_state = :failed, #error = :e, updated_at = :at, finished_at = :at",
                condition="bf_state = :running",
                names={"#error": "error"},
                values={
                    ":failed": str(BackfillState.FAILED),
                    ":e": error[:500],
                    ":at": at,
                    ":running": str(BackfillState.RUNNING),
                },
            )
        except ConditionFailed:
            return False
        return True
