"""The stores the services use, by what they do: jobs, runs and attempts, leases, semaphores and
buckets, outputs, notifications, usage, and the run queues.

Each Protocol lists the operations services, long jobs and the API call; the DynamoDB/SQS/S3 classes of
:mod:`jobsched.aws` implement them (``JobsStore``, ``RunsStore``, ``AttemptStore``, ``Leases``,
``Semaphores``, ``Buckets``, ``OutputStore``, ``NotifyOutbox``, ``UsageStore``, ``RunQueues``), written
on the lower ports (:class:`~jobsched.ports.tables.Table`, :class:`~jobsched.ports.queues.SqsApi`,
:class:`~jobsched.ports.objects.ObjectApi`). The fakes of :mod:`jobsched.testing` replace the lower
ports, so every conditional write of these stores keeps its exact condition in tests.

The values the stores answer with live here, so the ports depend on the core only.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Protocol

from jobsched.core.errors import ConflictError
from jobsched.core.limits import RateSpec
from jobsched.core.messages import Outgoing, RunMessage
from jobsched.core.models import Job, Run, RunState
from jobsched.core.usage import DayUsage
from jobsched.ports.tables import Table

# --- values ----------------------------------------------------------------------------------------


class ClaimStatus:
    CLAIMED = "claimed"  # this worker now owns the attempt
    FINISHED = "finished"  # the run already ended: acknowledge the delivery, do nothing
    STALE = "stale"  # the delivery is for an attempt that is no longer current: acknowledge
    BUSY = "busy"  # another worker holds a live lease: leave the message for later
    MISSING = "missing"  # no such run item (deleted): acknowledge
    EXHAUSTED = "exhausted"  # the previous owner's lease expired and no attempts are left


@dataclass(frozen=True)
class Binding:
    """What an attempt's claim records of the code that runs it (decision 0048): the handler's name,
    the version the worker means to run (the message's pinned or bound one, else the newest it
    registers; None: nothing to bind, e.g. a handler this code lacks) and the deployment's code
    version. The claim binds the run to ``version`` unless it is bound already; then the run's
    version wins and the attempt entry records that one."""

    handler: str | None = None
    version: int | None = None
    code_version: str | None = None


@dataclass
class Claim:
    """What a worker's claim of an attempt found: ``status`` (a :class:`ClaimStatus`), the run."""

    status: str
    run: Run | None = None
    item: dict[str, Any] | None = None
    attempt: int = 0
    took_over: bool = False
    superseded: bool = False  # STALE because a newer message of the run was sent (send token)

    @property
    def index(self) -> int:
        """Position of this attempt in the run's ``attempts`` list (for fenced in-place updates)."""
        return len(self.run.attempts) - 1 if self.run else -1


@dataclass(frozen=True)
class Lease:
    """A shard lease held by ``owner`` until ``until``; ``token`` (the fencing token) increases with
    every acquisition."""

    key: str
    owner: str
    token: int
    until: datetime
    legacy_until: datetime | None = None

    def in_legacy_window(self, now: datetime) -> bool:
        return self.legacy_until is not None and now < self.legacy_until


class LeaseHeldError(ConflictError):
    """Raised when a lease is held by another owner and has not expired yet."""

    code = "lease_held"


@dataclass(frozen=True)
class Refusal:
    """The semaphore is full: a slot frees within ``frees_in`` seconds at the latest (a lease end);
    ``registered``: the run is a waiter and a release will wake it sooner."""

    frees_in: float
    registered: bool


@dataclass(frozen=True)
class Waiter:
    """A waiting run's message, to be made visible: its queue and receipt handle."""

    run_id: str
    queue_url: str
    receipt_handle: str


@dataclass(frozen=True)
class PoolCeiling:
    """A pool's ceiling as the capacity function last set it (decision 0057): ``ceiling`` invocations
    since ``set_at_ms``, in force until ``until_ms`` (epoch ms; the function renews it while it holds a
    raise, so an entry it stopped renewing falls back to the base)."""

    ceiling: int
    set_at_ms: int
    until_ms: int

    def in_force(self, now_ms: int) -> int | None:
        """The ceiling if its entry has not lapsed at ``now_ms``, else None (the base)."""
        return self.ceiling if self.until_ms > now_ms else None


@dataclass
class SendReport:
    sent: list[str] = field(default_factory=list)  # Outgoing.key of each message SQS accepted
    failed: dict[str, str] = field(default_factory=dict)  # Outgoing.key -> error


# --- stores ----------------------------------------------------------------------------------------


class JobRecords(Protocol):
    """Job definitions and the due index (every write conditional on the job's version)."""

    @property
    def dynamo(self) -> Table: ...  # the item store it writes on (services write some updates through it)

    table: str

    def create(self, job: Job) -> Job: ...

    def get(self, tenant: str, job_id: str, *, consistent: bool = True) -> Job: ...

    def list(
        self, tenant: str, *, limit: int = 50, start_after: str | None = None
    ) -> tuple[builtins.list[Job], str | None]: ...

    def replace(self, job: Job, expected_version: int, read: Job | None = None) -> Job: ...

    def delete(self, tenant: str, job_id: str, expected_version: int | None = None) -> None: ...

    def name_ref(self, tenant: str, name: str) -> tuple[str, datetime] | None: ...

    def claim_name(
        self, tenant: str, name: str, job_id: str, now: datetime, *, replacing: str | None = None
    ) -> bool: ...

    def release_name(self, tenant: str, name: str, job_id: str) -> bool: ...

    def declared_names(self, tenant: str) -> dict[str, str]: ...

    def named(self, tenant: str, name: str) -> builtins.list[Job]: ...

    def due_keys(
        self, key: str, until: datetime, *, limit: int = 100, start_key: dict[str, Any] | None = None
    ) -> tuple[builtins.list[tuple[str, str]], dict[str, Any] | None]: ...

    def get_many(self, keys: builtins.list[tuple[str, str]]) -> builtins.list[Job]: ...

    def rekey_legacy(self, key: str) -> int: ...

    def advance(self, read: Job, updated: Job, fence: int | None, fence_lease: str | None = None) -> None: ...


class RunRecords(Protocol):
    """Runs: created once per occurrence (a conditional put), moved through the state machine by
    conditional updates."""

    @property
    def dynamo(self) -> Table: ...

    table: str

    def create(self, run: Run) -> tuple[Run, bool]: ...

    def announce(self, runs: Iterable[Run], *, feed: bool = True, at: datetime | None = None) -> int: ...

    def put_announced(self, run: Run) -> tuple[Run, bool]: ...

    def put_announced_many(self, runs: list[Run], *, concurrency: int = 1) -> list[tuple[Run, bool]]: ...

    def get(self, run_id: str, tenant: str | None = None, *, consistent: bool = True) -> Run: ...

    def find(self, run_id: str) -> Run | None: ...

    def transition(
        self, run: Run, new_state: RunState, now: datetime, *, reason: str | None = None
    ) -> Run | None: ...

    def request_cancel(self, run: Run) -> Run | None: ...

    def queued_ahead(self, job_id: str, now: datetime, jitter_seconds: int = 0) -> list[Run]: ...

    def expiry_after(self, instant: datetime) -> int | None: ...

    def revive(self, record: Run, withdrawn: Run, reason: str = "paused") -> tuple[Run, bool]: ...

    def refresh(self, run: Run, updated: Run, version: int) -> Run | None: ...

    def reschedule(self, run: Run, version: int, now: datetime, reason: str) -> Run | None: ...

    def withdrawn_after(
        self, job_id: str, now: datetime, jitter_seconds: int = 0, reason: str = "paused"
    ) -> list[Run]: ...

    def relabel_skipped(self, run: Run, old_reason: str, new_reason: str) -> Run | None: ...

    def list_for_job(
        self,
        job_id: str,
        *,
        limit: int = 50,
        newest_first: bool = True,
        start_after: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: datetime | None = None,
    ) -> tuple[list[Run], str | None]: ...

    def list_for_tenant(
        self, tenant: str, *, limit: int = 50, start_after: str | None = None
    ) -> tuple[list[Run], str | None]: ...

    def list_dead_letters(
        self, tenant: str, *, limit: int = 50, start_key: dict[str, Any] | None = None
    ) -> tuple[list[Run], dict[str, Any] | None]: ...


class AttemptRecords(Protocol):
    """A run's attempts: claimed under a lease, every later write fenced by the attempt number."""

    @property
    def dynamo(self) -> Table: ...

    table: str

    def get(self, run_id: str) -> Run: ...

    def get_item(self, run_id: str) -> dict[str, Any] | None: ...

    def claim(
        self,
        run_id: str,
        attempt: int,
        owner: str,
        now: datetime,
        lease_seconds: float,
        token: str | None = None,
        binding: Binding | None = None,
    ) -> Claim: ...

    def heartbeat(
        self, run_id: str, attempt: int, owner: str, now: datetime, lease_seconds: float, progress: Any = None
    ) -> bool: ...

    def succeed(
        self, claim: Claim, owner: str, now: datetime, output: Any = None, output_ref: str | None = None
    ) -> Run: ...

    def retrying(
        self,
        claim: Claim,
        owner: str,
        now: datetime,
        retry_at: datetime,
        error: str,
        token: str | None = None,
    ) -> Run: ...

    def dead_letter(
        self, claim: Claim, owner: str, now: datetime, error: str, reason: str, message: str | None
    ) -> Run: ...

    def cancelled(self, claim: Claim, owner: str, now: datetime) -> Run: ...

    def hand_back(self, claim: Claim, owner: str, now: datetime) -> Run: ...

    def skip_unstarted(self, run_id: str, token: str | None, now: datetime, reason: str) -> Run | None: ...

    def mark_waiting(self, run_id: str, attempt: int, reason: str, now: datetime, until: datetime) -> str: ...

    def cancel_flags(self, run_ids: Sequence[str]) -> set[str]: ...

    def record_flag_read(self, *, request: bool) -> None: ...

    def fail_unclaimed(
        self, run: Run, now: datetime, error: str, reason: str, message: str | None
    ) -> Run: ...


class ShardLeases(Protocol):
    """Leases with fencing tokens (one per dispatcher shard)."""

    def acquire(
        self,
        key: str,
        owner: str,
        now: datetime,
        ttl: timedelta | None = None,
        *,
        legacy_window: timedelta | None = None,
    ) -> Lease: ...

    def check(self, lease: Lease, now: datetime) -> None: ...

    def release(self, lease: Lease, now: datetime) -> bool: ...


class ConcurrencySlots(Protocol):
    """Counting semaphores (per tenant, per job type) with leased slots and registered waiters."""

    def acquire(
        self,
        key: str,
        holder: str,
        limit: int,
        now: datetime,
        lease_seconds: float,
        *,
        waiter: tuple[str, str, str] | None = None,
    ) -> Refusal | None: ...

    def renew(self, key: str, holder: str, limit: int, now: datetime, lease_seconds: float) -> bool: ...

    def release(self, key: str, holder: str, now: datetime) -> Waiter | None: ...

    def peek(self, key: str) -> dict[str, int]: ...

    def look(self, key: str, pool: str) -> tuple[dict[str, int], PoolCeiling | None]: ...

    def holders(self, key: str) -> dict[str, int]: ...


class PoolCeilings(Protocol):
    """Where the capacity function writes a pool's ceiling for the fair share's gate (decision 0057)."""

    def record(self, kind: str, ceiling: int, now: datetime, *, changed: bool) -> None: ...


class RateBuckets(Protocol):
    """Token buckets: ``take`` answers None (taken) or the seconds until a token is there."""

    def take(self, key: str, spec: RateSpec, now: datetime) -> float | None: ...


class Outputs(Protocol):
    """Run outputs and payloads too large to keep inline."""

    def place_output(self, tenant: str, run_id: str, attempt: int, output: Any) -> tuple[Any, str | None]: ...

    def put_payload(self, tenant: str, run_id: str, payload: Any, label: str) -> str: ...

    def get_json(self, key: str) -> Any: ...


class NotificationOutbox(Protocol):
    """Dead-letter notifications waiting on a run item, claimed under a lease and settled once."""

    def claim(
        self, item: Mapping[str, Any], now: datetime, lease_seconds: float
    ) -> dict[str, Any] | None: ...

    def settle(self, item: Mapping[str, Any], outcome: Mapping[str, Any]) -> bool: ...

    def release(self, item: Mapping[str, Any], outcome: Mapping[str, Any]) -> None: ...


class NotificationPublisher(Protocol):
    """Publishes one notification to a topic; returns the message id."""

    def publish(self, topic_arn: str, body: Mapping[str, Any], subject: str) -> str: ...


class UsageRecords(Protocol):
    """Per-tenant daily usage counters."""

    def add(self, usage: DayUsage) -> None: ...

    def tenant_days(self, tenant: str, first: date, last: date) -> list[DayUsage]: ...

    def all_days(self, first: date, last: date) -> list[DayUsage]: ...


class RunQueue(Protocol):
    """The priority queues: run messages sent with their delay and the tenant as message group."""

    def send(self, outgoing: list[Outgoing]) -> SendReport: ...

    def send_one(self, msg: RunMessage, now: datetime) -> None: ...

    def send_body(self, queue: str, body: str, tenant: str) -> None: ...

    def set_visibility(self, queue_url: str, receipt_handle: str, seconds: int) -> bool: ...

    def set_visibility_batch(
        self, queue_url: str, receipt_handles: Sequence[str], seconds: int
    ) -> set[str]: ...

    def visible_messages(self, queue: str) -> int: ...

    def depths(self, queue: str) -> dict[str, int]: ...


__all__ = [
    "AttemptRecords",
    "Claim",
    "ClaimStatus",
    "ConcurrencySlots",
    "JobRecords",
    "Lease",
    "LeaseHeldError",
    "NotificationOutbox",
    "NotificationPublisher",
    "Outputs",
    "RateBuckets",
    "Refusal",
    "RunQueue",
    "RunRecords",
    "SendReport",
    "ShardLeases",
    "UsageRecords",
    "Waiter",
]


class SpendCap(Protocol):
    """The tenants' monthly spend caps as the on-demand operations ask them
    (:class:`jobsched.services.budgets.BudgetGate`, decision 0062)."""

    def capped(self, tenant: str, now: datetime) -> bool: ...

    def refuse_if_capped(self, tenant: str, now: datetime, operation: str) -> None: ...
