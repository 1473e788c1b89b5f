"""Jobs and runs as plain dataclasses, their DynamoDB item shapes, ids and the run state machine.

Why dataclasses and hand-written ``to_item``/``from_item``: the item layout is a cost decision (every
byte of a run item and every index attribute is billed, see docs/decisions/0001-data-model.md), so it
is spelled out here instead of being derived by a serializer. Items use the DynamoDB *resource-free*
Python form (``str``, ``int``, ``Decimal``, ``bool``, ``dict``, ``list``); the stores convert them with
boto3's ``TypeSerializer``. Instants are UTC ISO 8601 strings ending in ``Z``; a key that must be a
number (the due index) holds epoch milliseconds.

Nothing here reads the clock: ``now`` is always a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from decimal import Decimal
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.ids import (
    make_run_id,
    parse_run_id,
    partition_for,
    partition_key,
    run_key_for,
    scheduled_at_from_run_key,
    shard_for,
    validate_job_id,
)
from jobsched.core.instants import (
    _compact,
    _opt_dt,
    _opt_iso,
    _plain,
    from_epoch_ms,
    from_iso,
    require_aware,
    to_epoch_ms,
    to_iso,
)
from jobsched.core.states import (
    ACTIVE_RUN_STATES,
    ALLOWED_TRANSITIONS,
    DST_GAP_POLICIES,
    DST_OVERLAP_POLICIES,
    MISFIRE_POLICIES,
    OVERLAP_POLICIES,
    PRIORITIES,
    TERMINAL_RUN_STATES,
    JobState,
    RunState,
    Trigger,
    check_transition,
)

#: The public entry point of the data model: its own classes and the vocabulary of
#: :mod:`.instants`, :mod:`.states` and :mod:`.ids`.
__all__ = [
    "ACTIVE_RUN_STATES",
    "ALLOWED_TRANSITIONS",
    "DST_GAP_POLICIES",
    "DST_OVERLAP_POLICIES",
    "MISFIRE_POLICIES",
    "OVERLAP_POLICIES",
    "PRIORITIES",
    "TERMINAL_RUN_STATES",
    "Attempt",
    "Job",
    "JobSpec",
    "JobState",
    "RetrySpec",
    "Run",
    "RunState",
    "Trigger",
    "check_transition",
    "from_epoch_ms",
    "from_iso",
    "make_run_id",
    "parse_run_id",
    "partition_for",
    "partition_key",
    "require_aware",
    "run_key_for",
    "scheduled_at_from_run_key",
    "shard_for",
    "tenant_sort_for",
    "to_epoch_ms",
    "to_iso",
    "validate_job_id",
]


# --- jobs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrySpec:
    """How a run's attempts are retried: capped exponential backoff with full jitter."""

    max_attempts: int = 3
    base_seconds: float = 2.0
    max_seconds: float = 300.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "base_seconds": self.base_seconds,
            "max_seconds": self.max_seconds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> RetrySpec:
        data = _plain(data or {})
        unknown = set(data) - {"max_attempts", "base_seconds", "max_seconds"}
        if unknown:
            raise ValidationError(f"unknown retry fields: {', '.join(sorted(unknown))}", field="retry")
        try:
            spec = cls(
                max_attempts=int(data.get("max_attempts", cls.max_attempts)),
                base_seconds=float(data.get("base_seconds", cls.base_seconds)),
                max_seconds=float(data.get("max_seconds", cls.max_seconds)),
            )
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"retry fields must be numbers: {exc}", field="retry") from exc
        if not 1 <= spec.max_attempts <= 100:
            raise ValidationError("retry.max_attempts must be 1..100", field="retry")
        if not 0 <= spec.base_seconds <= spec.max_seconds <= 86400:
            raise ValidationError("retry needs 0 <= base_seconds <= max_seconds <= 86400", field="retry")
        return spec


@dataclass(kw_only=True)
class JobSpec:
    """What a client asks for: everything about a job except its identity and dispatch state."""

    name: str
    schedule: str
    timezone: str = "UTC"
    target: dict[str, Any] = field(default_factory=dict)  # {"handler": n} | {"http": {url, method, ...}}
    payload: dict[str, Any] = field(default_factory=dict)
    priority: str = "default"
    #: Where its runs execute (:mod:`jobsched.core.pools`): ``lambda``, ``long`` or ``container``. None
    #: in a definition that names none (the job service stores :func:`~jobsched.core.pools.default_pool`)
    #: and on a job stored before jobs had pools (its runs go to the ``lambda`` pool).
    pool: str | None = None
    timeout_seconds: int = 300
    retry: RetrySpec = field(default_factory=RetrySpec)
    misfire_policy: str = "run_once"
    misfire_grace_seconds: int = 60
    max_catchup: int = 100
    overlap_policy: str = "allow"
    dst_gap: str = "shift"
    dst_overlap: str = "first"
    jitter_seconds: int = 0
    #: Seconds after each occurrence's scheduled instant by which its run must have succeeded; a run
    #: that has not is reported once (``deadline_missed_at``; :mod:`jobsched.core.deadlines`). 0: none.
    deadline_seconds: int = 0
    description: str = ""
    #: Who is told when a run of the job is dead-lettered (:mod:`jobsched.core.notify`); ``{}``: the
    #: tenant's default.
    notify: dict[str, str] = field(default_factory=dict)
    #: ``{"key", "limit"}``: at most ``limit`` runs holding ``key`` execute at once (``{}``: no limit;
    #: :mod:`jobsched.core.limits`).
    concurrency: dict[str, Any] = field(default_factory=dict)
    #: ``{"key", "per_second", "burst"}``: a token bucket shared by the jobs naming ``key`` (``{}``: none).
    rate_limit: dict[str, Any] = field(default_factory=dict)

    def spec_fields(self) -> dict[str, Any]:
        """The definition part only (used to copy a spec into a :class:`Job`)."""
        return {f.name: getattr(self, f.name) for f in fields(JobSpec)}


@dataclass(kw_only=True)
class Job(JobSpec):
    """A stored job: its definition plus identity, lifecycle and the dispatcher's bookkeeping.

    ``next_due_at`` is the earliest occurrence not yet dispatched (``None`` when nothing is left);
    ``last_fired_at`` the latest scheduled instant a run was created for; ``last_run_id`` points at that
    run so the overlap policy needs one GetItem, not a query. ``fence`` is the highest token of the
    shard lease ``fence_lease`` that advanced the job (a stale holder of that lease, with a lower token,
    is refused; tokens of different leases are not compared: docs/decisions/0016-due-partitions.md).
    """

    id: str
    tenant: str
    state: JobState = JobState.ACTIVE
    version: int = 1
    created_at: datetime
    updated_at: datetime
    next_due_at: datetime | None = None
    last_fired_at: datetime | None = None
    last_run_id: str | None = None
    buffered_at: datetime | None = None
    paused_note: str | None = None
    paused_at: datetime | None = None
    misfire_override: str | None = None
    fence: int | None = None
    fence_lease: str | None = None
    #: The handler version whose payload contract the job's payload was checked against when it was
    #: last written (None: an HTTP target, or a job written before handlers had versions, read as 1).
    #: A run bound to a newer version gets the payload upgraded from this one (decision 0048).
    payload_version: int | None = None

    def to_item(self) -> dict[str, Any]:
        item: dict[str, Any] = {
            "tenant": self.tenant,
            "job_id": self.id,
            "name": self.name,
            "schedule": self.schedule,
            "timezone": self.timezone,
            "target": self.target,
            "payload": self.payload,
            "priority": self.priority,
            "pool": self.pool,
            "timeout_seconds": self.timeout_seconds,
            "retry": {k: Decimal(str(v)) for k, v in self.retry.to_dict().items()},
            "misfire_policy": self.misfire_policy,
            "misfire_grace_seconds": self.misfire_grace_seconds,
            "max_catchup": self.max_catchup,
            "overlap_policy": self.overlap_policy,
            "dst_gap": self.dst_gap,
            "dst_overlap": self.dst_overlap,
            "jitter_seconds": self.jitter_seconds,
            "deadline_seconds": self.deadline_seconds or None,
            "description": self.description or None,
            "notify": self.notify or None,
            "concurrency": _limit_item(self.concurrency),
            "rate_limit": _limit_item(self.rate_limit),
            "state": str(self.state),
            "version": self.version,
            "created_at": to_iso(self.created_at),
            "updated_at": to_iso(self.updated_at),
            "next_due_at": _opt_iso(self.next_due_at),
            "last_fired_at": _opt_iso(self.last_fired_at),
            "last_run_id": self.last_run_id,
            "buffered_at": _opt_iso(self.buffered_at),
            "paused_note": self.paused_note,
            "paused_at": _opt_iso(self.paused_at),
            "misfire_override": self.misfire_override,
            "fence": self.fence,
            "fence_lease": self.fence_lease,
            "payload_version": self.payload_version,
        }
        item.update(self.due_index_attributes())
        return _compact(item) | {"payload": self.payload}

    def due_index_attributes(self) -> dict[str, Any]:
        """Sparse due index keys: present only while the job is active and has something to decide.

        ``due_shard`` holds the job's due partition (``p<n>``, from its id alone); the attribute kept its
        name from when it held a shard number, so the index needed no rebuild.
        A job holding a buffered occurrence (overlap ``buffer_one``) stays due from that instant on, so
        every tick re-checks whether the previous run has finished and the buffered one can start.
        """
        if self.state is not JobState.ACTIVE:
            return {}
        candidates = [t for t in (self.next_due_at, self.buffered_at) if t is not None]
        if not candidates:
            return {}
        return {"due_shard": partition_key(partition_for(self.id)), "due_at": to_epoch_ms(min(candidates))}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Job:
        data = _plain(item)
        return cls(
            id=data["job_id"],
            tenant=data["tenant"],
            name=data["name"],
            schedule=data["schedule"],
            timezone=data.get("timezone", "UTC"),
            target=data.get("target", {}),
            payload=data.get("payload", {}),
            priority=data.get("priority", "default"),
            pool=data.get("pool"),
            timeout_seconds=data.get("timeout_seconds", 300),
            retry=RetrySpec.from_dict(data.get("retry")),
            misfire_policy=data.get("misfire_policy", "run_once"),
            misfire_grace_seconds=data.get("misfire_grace_seconds", 60),
            max_catchup=data.get("max_catchup", 100),
            overlap_policy=data.get("overlap_policy", "allow"),
            dst_gap=data.get("dst_gap", "shift"),
            dst_overlap=data.get("dst_overlap", "first"),
            jitter_seconds=data.get("jitter_seconds", 0),
            deadline_seconds=int(data.get("deadline_seconds") or 0),
            description=data.get("description", ""),
            notify=data.get("notify") or {},
            concurrency=data.get("concurrency") or {},
            rate_limit=data.get("rate_limit") or {},
            state=JobState(data.get("state", "active")),
            version=data.get("version", 1),
            created_at=from_iso(data["created_at"]),
            updated_at=from_iso(data["updated_at"]),
            next_due_at=_opt_dt(data.get("next_due_at")),
            last_fired_at=_opt_dt(data.get("last_fired_at")),
            last_run_id=data.get("last_run_id"),
            buffered_at=_opt_dt(data.get("buffered_at")),
            paused_note=data.get("paused_note"),
            paused_at=_opt_dt(data.get("paused_at")),
            misfire_override=data.get("misfire_override"),
            fence=data.get("fence"),
            fence_lease=data.get("fence_lease"),
            payload_version=_opt_int(data.get("payload_version")),
        )


def _opt_int(value: Any) -> int | None:
    """A stored version number as an int (DynamoDB reads numbers back as Decimal), or None."""
    return None if value is None else int(value)


def _limit_item(spec: dict[str, Any]) -> dict[str, Any] | None:
    """A limit as stored (numbers as Decimal for DynamoDB; ``None`` when there is none)."""
    if not spec:
        return None
    return {k: Decimal(str(v)) if isinstance(v, float) else v for k, v in spec.items()}


# --- runs ----------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Attempt:
    """One execution attempt of a run (kept in the run item's ``attempts`` list)."""

    attempt: int
    started_at: datetime
    finished_at: datetime | None = None
    outcome: str | None = None  # succeeded | failed | retrying | timeout | cancelled | lost
    error: str | None = None
    #: What ran it: the handler's name and version (None for an HTTP target) and the code version of
    #: the deployment whose worker executed it (``JOBSCHED_CODE_VERSION``; decision 0048).
    handler: str | None = None
    handler_version: int | None = None
    code_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _compact(
            {
                "attempt": self.attempt,
                "started_at": to_iso(self.started_at),
                "finished_at": _opt_iso(self.finished_at),
                "outcome": self.outcome,
                "error": self.error,
                "handler": self.handler,
                "handler_version": self.handler_version,
                "code_version": self.code_version,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        data = _plain(data)
        return cls(
            attempt=data["attempt"],
            started_at=from_iso(data["started_at"]),
            finished_at=_opt_dt(data.get("finished_at")),
            outcome=data.get("outcome"),
            error=data.get("error"),
            handler=data.get("handler"),
            handler_version=_opt_int(data.get("handler_version")),
            code_version=data.get("code_version"),
        )


def tenant_sort_for(run_key: str, job_id: str) -> str:
    """A run's entry in its tenant's run feed and the tenant listing's cursor: scheduled instant
    first, so a tenant's runs sort newest-first (:mod:`jobsched.core.feed`)."""
    return f"{run_key}#{job_id}"


#: The item attribute ``limit_wait_<n>``: when the delivery of attempt ``n`` first waited for a limit.
LIMIT_WAIT_PREFIX = "limit_wait_"


def limit_wait_attribute(attempt: int) -> str:
    return f"{LIMIT_WAIT_PREFIX}{attempt}"


@dataclass(kw_only=True)
class Run:
    """One occurrence of a job (or a manual/backfill/replay run) and its whole history.

    The item stays small (well under 1 KB for a cron run): no payload copy unless overridden (the payload
    travels in the SQS message), no empty attributes, no index keys but the sparse dead-letter ones.
    ``tenant`` is kept for isolation checks; the tenant listing reads the run feed, written once per
    batch of created runs (docs/decisions/0004-tenant-run-feed.md).
    """

    id: str
    job_id: str
    tenant: str
    state: RunState = RunState.QUEUED
    trigger: Trigger = Trigger.SCHEDULE
    scheduled_at: datetime
    due_at: datetime
    priority: str = "default"
    #: The pool it executes on (:mod:`jobsched.core.pools`; its queue is ``queue_for(pool, priority)``).
    #: Stored only when not ``lambda``: an item without it (and one written before runs had pools) is
    #: a ``lambda`` run.
    pool: str = "lambda"
    attempt: int = 0
    max_attempts: int = 3
    lease_until: datetime | None = None
    lease_owner: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    output: Any = None
    output_ref: str | None = None
    error: str | None = None
    skip_reason: str | None = None
    skipped_count: int | None = None  # a summary record of many skipped occurrences
    skipped_until: datetime | None = None
    cancel_requested: bool = False
    payload_override: dict[str, Any] | None = None
    replays: list[dict[str, Any]] = field(default_factory=list)
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    progress: dict[str, Any] | None = None
    dead_lettered_at: datetime | None = None
    expires_at: int | None = None  # epoch seconds, DynamoDB TTL
    #: The token of the newest message sent for this run; a delivery carrying another is stale.
    send_token: str | None = None
    #: What the run waits for before it may start (``concurrency:<key>``, ``rate:<key>``,
    #: ``concurrency:@tenant``, ``rate:@tenant``), until about ``waiting_until``; cleared by the claim.
    waiting_for: str | None = None
    waiting_until: datetime | None = None
    #: How many times its deliveries waited for a limit, and when the first wait was (kept: history).
    waits: int = 0
    first_waited_at: datetime | None = None
    #: Per attempt number, when its delivery first waited for a limit (item attributes
    #: ``limit_wait_<n>``, written by the wait's own write; the run's phases, :mod:`jobsched.core.phases`).
    limit_waits: dict[int, datetime] = field(default_factory=dict)
    #: The node of a DAG workflow this run is (its id is ``<workflow run id>.n<node>``); None otherwise.
    wf_node: str | None = None
    #: The job ``version`` whose definition the run's current ``send_token`` was sent with (None: a run
    #: written before runs carried it, or not made from a job). An edit re-plans only runs of an older
    #: version, so a slower writer never puts an older definition back (docs/decisions/0030).
    job_version: int | None = None
    #: The handler the run executes (None: an HTTP target or a run written before runs named it) and
    #: the version it is bound to: a pinned job's version from creation, else the newest registered
    #: version when its first attempt started; kept for its retries, a takeover and a replay.
    handler: str | None = None
    handler_version: int | None = None
    #: When a scheduled run must have succeeded (its job's ``deadline_seconds`` after the scheduled
    #: instant; None: no deadline) and when the sweeper found it had not (:mod:`jobsched.core.deadlines`).
    deadline_at: datetime | None = None
    deadline_missed_at: datetime | None = None

    @property
    def run_key(self) -> str:
        return parse_run_id(self.id)[1]

    def to_item(self) -> dict[str, Any]:
        item = {
            "job_id": self.job_id,
            "run_key": self.run_key,
            "tenant": self.tenant,
            "state": str(self.state),
            "trigger": str(self.trigger),
            "scheduled_at": to_iso(self.scheduled_at),
            "due_at": to_iso(self.due_at),
            "priority": self.priority,
            "pool": self.pool if self.pool != "lambda" else None,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "lease_until": _opt_iso(self.lease_until),
            "lease_owner": self.lease_owner,
            "attempts": [a.to_dict() for a in self.attempts],
            "output": self.output,
            "output_ref": self.output_ref,
            "error": self.error,
            "skip_reason": self.skip_reason,
            "skipped_count": self.skipped_count,
            "skipped_until": _opt_iso(self.skipped_until),
            "cancel_requested": self.cancel_requested,
            "payload_override": self.payload_override,
            "replays": self.replays,
            "created_at": to_iso(self.created_at),
            "started_at": _opt_iso(self.started_at),
            "finished_at": _opt_iso(self.finished_at),
            "progress": self.progress,
            "expires_at": self.expires_at,
            "send_token": self.send_token,
            "waiting_for": self.waiting_for,
            "waiting_until": _opt_iso(self.waiting_until),
            "waits": self.waits or None,
            "first_waited_at": _opt_iso(self.first_waited_at),
            **{limit_wait_attribute(n): to_iso(at) for n, at in self.limit_waits.items()},
            "wf_node": self.wf_node,
            "job_version": self.job_version,
            "handler": self.handler,
            "handler_version": self.handler_version,
            "deadline_at": _opt_iso(self.deadline_at),
            "deadline_missed_at": _opt_iso(self.deadline_missed_at),
        }
        if self.dead_lettered_at is not None:
            item["dl_tenant"] = self.tenant
            item["dl_at"] = to_iso(self.dead_lettered_at)
        return _compact(item)

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Run:
        data = _plain(item)
        return cls(
            id=f"{data['job_id']}.{data['run_key']}",
            job_id=data["job_id"],
            tenant=data["tenant"],
            state=RunState(data["state"]),
            trigger=Trigger(data.get("trigger", "schedule")),
            scheduled_at=from_iso(data["scheduled_at"]),
            due_at=from_iso(data["due_at"]),
            priority=data.get("priority", "default"),
            pool=data.get("pool") or "lambda",
            attempt=data.get("attempt", 0),
            max_attempts=data.get("max_attempts", 3),
            lease_until=_opt_dt(data.get("lease_until")),
            lease_owner=data.get("lease_owner"),
            attempts=[Attempt.from_dict(a) for a in data.get("attempts", [])],
            output=data.get("output"),
            output_ref=data.get("output_ref"),
            error=data.get("error"),
            skip_reason=data.get("skip_reason"),
            skipped_count=data.get("skipped_count"),
            skipped_until=_opt_dt(data.get("skipped_until")),
            cancel_requested=bool(data.get("cancel_requested", False)),
            payload_override=data.get("payload_override"),
            replays=data.get("replays", []),
            created_at=from_iso(data["created_at"]),
            started_at=_opt_dt(data.get("started_at")),
            finished_at=_opt_dt(data.get("finished_at")),
            progress=data.get("progress"),
            dead_lettered_at=_opt_dt(data.get("dl_at")),
            expires_at=data.get("expires_at"),
            send_token=data.get("send_token"),
            waiting_for=data.get("waiting_for"),
            waiting_until=_opt_dt(data.get("waiting_until")),
            waits=int(data.get("waits") or 0),
            first_waited_at=_opt_dt(data.get("first_waited_at")),
            limit_waits={
                int(k[len(LIMIT_WAIT_PREFIX) :]): from_iso(v)
                for k, v in data.items()
                if k.startswith(LIMIT_WAIT_PREFIX) and k[len(LIMIT_WAIT_PREFIX) :].isdigit()
            },
            wf_node=data.get("wf_node"),
            job_version=data.get("job_version"),
            handler=data.get("handler"),
            handler_version=_opt_int(data.get("handler_version")),
            deadline_at=_opt_dt(data.get("deadline_at")),
            deadline_missed_at=_opt_dt(data.get("deadline_missed_at")),
        )

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_RUN_STATES
