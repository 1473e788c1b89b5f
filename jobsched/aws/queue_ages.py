"""The age of the oldest queued run per priority, as the last sweep measured it (one Leases item).

SQS has no queue attribute for the age of a queue's oldest message (it is the CloudWatch metric
``ApproximateAgeOfOldestMessage``). The sweeper already reads every run in flight that is past due
(docs/decisions/0014), so it notes, per priority, the earliest ``due_at`` of the runs it found still
``queued`` and not waiting for a limit, and writes them in one item (``lease_key =
"backpressure#queue-ages"``): ``oldest_<priority>`` (ISO instant, absent when nothing was old) and
``measured_at``. The dispatcher's backpressure reads the item (one eventually consistent GetItem, 0.5
RRU) on a tick that has a due job of a priority with an age limit (docs/decisions/0028).

A sweeper process writes the item only when its content changes from what it last wrote (a new
container writes once), so an idle deployment pays for no write per sweep.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jobsched.aws.errors import AwsError
from jobsched.core.instants import from_iso
from jobsched.core.models import to_iso
from jobsched.ports.tables import Table

KEY = "backpressure#queue-ages"
MEASURED_AT = "measured_at"


def _attribute(priority: str) -> str:
    return f"oldest_{priority}"


class QueueAgesUnreadable(Exception):
    """Raised when the ages item cannot be read (throttling, permissions): the caller dispatches."""


class QueueAges:
    """Reads and writes the per-priority oldest queued due instants in the Leases table."""

    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table
        self._written: dict[str, str] | None = None  # what this process last wrote (its content)

    def read(self) -> dict[str, datetime]:
        """``{priority: oldest queued due instant}`` of the last sweep (empty: none, or no sweep yet)."""
        try:
            item = self.dynamo.get(self.table, {"lease_key": KEY})
        except AwsError as exc:
            raise QueueAgesUnreadable(f"{type(exc).__name__}: {exc}") from exc
        if not item:
            return {}
        ages: dict[str, datetime] = {}
        for name, value in item.items():
            if name.startswith("oldest_") and isinstance(value, str):
                ages[name.removeprefix("oldest_")] = from_iso(value)
        return ages

    def record(self, oldest: Mapping[str, datetime], now: datetime) -> bool:
        """Write the sweep's measurement (``{priority: oldest due}``); whether a write was made (none
        when it equals what this process wrote last)."""
        content = {_attribute(p): to_iso(due) for p, due in sorted(oldest.items())}
        if content == self._written:
            return False
        item: dict[str, Any] = {"lease_key": KEY, MEASURED_AT: to_iso(now), **content}
        self.dynamo.put(self.table, item)
        self._written = content
        return True
