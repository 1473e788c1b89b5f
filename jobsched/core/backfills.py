"""Asynchronous backfills (docs/decisions/0029-async-backfill.md): the record of one, its progress
arithmetic and the queue message that makes it advance. Pure: no boto3, no clock.

A backfill of more than :data:`SYNC_MAX_OCCURRENCES` occurrences is answered ``202`` with a record;
the runs are then created a slice of :data:`SLICE_SIZE` at a time by whoever receives the backfill's
message (the worker, from the job's priority queue). The record says how far it got: ``done`` of
``planned`` occurrences decided, of which ``created`` runs made by this backfill and ``existing`` found
already there (an earlier backfill of the same instant, or an interrupted attempt of this one);
``sent`` messages queued. Each slice's progress is written conditionally on ``done`` still being
the slice's start, so two deliveries of one message cannot both record a slice.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.instants import from_iso, to_iso

#: Backfills of at most this many occurrences are made within the request (201 with the runs).
SYNC_MAX_OCCURRENCES = 100
#: Occurrences one step of an asynchronous backfill decides (one feed batch, conditional puts, sends).
SLICE_SIZE = 100
#: How long a delivery keeps taking slices before it hands the rest to a new message (seconds).
SLICE_BUDGET_SECONDS = 10.0
#: A ``running`` backfill whose record has not moved for this long is resumed by a repeated request
#: with the same ``Idempotency-Key`` (its message was lost or dead-lettered).
STALE_SECONDS = 120
#: The partition prefix of backfill records in the Runs table (``backfill#<job id>``).
PARTITION_PREFIX = "backfill#"
SNAPSHOT_SUFFIX = "#job"
MESSAGE_KIND = "backfill"


class BackfillState(StrEnum):
    RUNNING = "running"  # slices left to decide
    SUCCEEDED = "succeeded"  # every occurrence decided, every queued run's message sent
    FAILED = "failed"  # stopped for good (the job was deleted); ``error`` says why


def new_backfill_id(tenant: str, job_id: str, idempotency_key: str | None) -> str:
    """``b`` + 24 characters: derived from (tenant, job, key) when the request carries an
    ``Idempotency-Key`` (a retry names the same backfill), random otherwise."""
    if idempotency_key is None:
        return "b" + secrets.token_hex(12)
    digest = hashlib.sha256(f"{tenant}\n{job_id}\n{idempotency_key}".encode()).hexdigest()
    return "b" + digest[:24]


@dataclass
class Backfill:
    """The record of one asynchronous backfill (its progress is what ``GET`` shows)."""

    id: str
    job_id: str
    tenant: str
    start: datetime
    end: datetime
    planned: int
    created_at: datetime
    updated_at: datetime
    state: BackfillState = BackfillState.RUNNING
    done: int = 0
    created: int = 0
    existing: int = 0
    sent: int = 0
    error: str | None = None
    finished_at: datetime | None = None
    expires_at: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def next_slice(self) -> tuple[int, int] | None:
        """The ``[first, last)`` occurrence indexes of the next slice, None when none is left."""
        if self.state is not BackfillState.RUNNING or self.done >= self.planned:
            return None
        return self.done, min(self.planned, self.done + SLICE_SIZE)

    def after_slice(self, created: int, existing: int, sent: int, now: datetime) -> Backfill:
        """The record once the next slice is decided with these counts."""
        bounds = self.next_slice()
        if bounds is None:
            raise ValueError("no slice left")
        done = bounds[1]
        finished = done >= self.planned
        return replace(
            self,
            done=done,
            created=self.created + created,
            existing=self.existing + existing,
            sent=self.sent + sent,
            updated_at=now,
            state=BackfillState.SUCCEEDED if finished else self.state,
            finished_at=now if finished else None,
        )

    def same_request(self, start: datetime, end: datetime) -> bool:
        return self.start == start and self.end == end

    def to_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "job_id": PARTITION_PREFIX + self.job_id,
            "run_key": self.id,
            "backfill_of": self.job_id,
            "tenant": self.tenant,
            "from": to_iso(self.start),
            "to": to_iso(self.end),
            "bf_planned": self.planned,
            "bf_done": self.done,
            "bf_created": self.created,
            "bf_existing": self.existing,
            "bf_sent": self.sent,
            "bf_state": str(self.state),
            "created_at": to_iso(self.created_at),
            "updated_at": to_iso(self.updated_at),
        }
        if self.error is not None:
            item["error"] = self.error
        if self.finished_at is not None:
            item["finished_at"] = to_iso(self.finished_at)
        if self.expires_at is not None:
            item["expires_at"] = self.expires_at
        return item

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Backfill:
        return cls(
            id=str(item["run_key"]),
            job_id=str(item["backfill_of"]),
            tenant=str(item["tenant"]),
            start=from_iso(str(item["from"])),
            end=from_iso(str(item["to"])),
            planned=int(item["bf_planned"]),
            done=int(item["bf_done"]),
            created=int(item["bf_created"]),
            existing=int(item["bf_existing"]),
            sent=int(item["bf_sent"]),
            state=BackfillState(str(item["bf_state"])),
            created_at=from_iso(str(item["created_at"])),
            updated_at=from_iso(str(item["updated_at"])),
            error=str(item["error"]) if item.get("error") is not None else None,
            finished_at=from_iso(str(item["finished_at"])) if item.get("finished_at") else None,
            expires_at=int(item["expires_at"]) if item.get("expires_at") is not None else None,
        )


@dataclass(frozen=True)
class BackfillMessage:
    """The queue message that makes a backfill advance: which record to take the next slices of."""

    tenant: str
    job_id: str
    backfill_id: str

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": MESSAGE_KIND,
                "tenant": self.tenant,
                "job_id": self.job_id,
                "backfill_id": self.backfill_id,
            },
            separators=(",", ":"),
        )

    @staticmethod
    def accepts(body: str) -> bool:
        """Whether ``body`` is a backfill message (cheap: no full parse of run messages)."""
        return f'"kind":"{MESSAGE_KIND}"' in body[:40]

    @classmethod
    def from_json(cls, body: str) -> BackfillMessage:
        try:
            data = json.loads(body)
            if data.get("kind") != MESSAGE_KIND:
                raise ValueError("not a backfill message")
            return cls(str(data["tenant"]), str(data["job_id"]), str(data["backfill_id"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValidationError(f"malformed backfill message: {exc}") from exc
