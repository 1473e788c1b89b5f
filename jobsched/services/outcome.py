"""What happened to one delivery: the worker's, the chunk runner's and the DLQ consumer's answer.

Its own module so that :mod:`jobsched.long_jobs` (which answers chunk messages) and the worker share
it without importing each other. ``defer`` means: do not acknowledge (SQS delivers the message again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class OutcomeStatus(StrEnum):
    """Every status a delivery can end in (a ``StrEnum``: it compares equal to its value)."""

    # a run delivery (worker)
    SUCCEEDED = "succeeded"  # the handler returned; the run is succeeded
    RETRYING = "retrying"  # the attempt failed; the next one is sent with a backoff delay
    DEAD_LETTERED = "dead_lettered"  # failed for good: in the dead letters
    CANCELLED = "cancelled"  # the run was cancelled before or while it ran
    FINISHED = "finished"  # the run had already ended: nothing done (a duplicate delivery)
    STALE = "stale"  # the delivery is for an attempt that is no longer current
    MISSING = "missing"  # no such run (deleted)
    BUSY = "busy"  # another worker holds a live lease: deferred
    WAITING = "waiting"  # held back by a concurrency or rate limit (services/limits.py): no attempt used
    REDELAYED = "redelayed"  # arrived before its due instant: re-sent with the rest of the delay
    LEASE_LOST = "lease_lost"  # another worker took the run over while this one ran it
    NO_TIME = "no_time"  # too little of the invocation left to run it: deferred
    HANDED_BACK = "handed_back"  # given up by a stopping worker (Worker.hand_back): deferred, no attempt used
    UNIDENTIFIED = "unidentified"  # a DLQ message too broken to name a run
    # a chunked run (long_jobs)
    CHUNKED_STARTED = "chunked_started"  # its Step Functions execution was started
    CHUNKED_RUNNING = "chunked_running"  # its execution was already running: taken over
    CHUNK_PLANNED = "chunk_planned"
    CHUNK_SUCCEEDED = "chunk_succeeded"
    CHUNK_ALREADY_DONE = "chunk_already_done"
    CHUNK_ANSWERED = "chunk_answered"
    CHUNK_FAILED = "chunk_failed"
    CHUNK_LOST = "chunk_lost"
    CHUNK_STALE = "chunk_stale"
    CHUNK_WAITING = "chunk_waiting"
    # an asynchronous backfill (services/backfills)
    BACKFILL_STEP = "backfill_step"  # some slices decided; a new message carries the rest
    BACKFILL_DONE = "backfill_done"  # its last slice decided: the record is succeeded
    # a DAG workflow run (services/workflows)
    WORKFLOW_STARTED = "workflow_started"  # its nodes were set up; the run finishes with its nodes


@dataclass
class Outcome:
    """What happened to one delivery. ``defer`` means: do not acknowledge (the message comes back)."""

    status: OutcomeStatus | str
    run_id: str | None = None
    attempt: int = 0
    defer: bool = False
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.status = OutcomeStatus(self.status)
