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

import re
import zlib
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from jobsched.core.errors import ConflictError, ValidationError

# --- instants ------------------------------------------------------------------------------------


def require_aware(value: datetime, what: str = "instant") -> datetime:
    """Return ``value`` unchanged if it is timezone-aware; naive datetimes are a bug, never guessed."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{what} must be timezone-aware, got naive {value.isoformat()}")
    return value


def to_iso(value: datetime) -> str:
    """Aware datetime -> ``2026-11-29T20:45:00.123Z`` (UTC, millisecond precision, always the same length)."""
    utc = require_aware(value).astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def from_iso(text: str) -> datetime:
    """Parse an ISO 8601 instant with an offset or ``Z``; naive strings are rejected."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"not an ISO 8601 instant: {text!r}") from exc
    return require_aware(parsed, f"instant {text!r}").astimezone(UTC)


def to_epoch_ms(value: datetime) -> int:
    """Aware datetime -> integer epoch milliseconds (the due index sort key)."""
    return int(require_aware(value).timestamp() * 1000)


def from_epoch_ms(value: int | Decimal) -> datetime:
    return datetime.fromtimestamp(int(value) / 1000, tz=UTC)


def _opt_iso(value: datetime | None) -> str | None:
    return to_iso(value) if value is not None else None


def _opt_dt(value: Any) -> datetime | None:
    return from_iso(value) if value else None


def _plain(value: Any) -> Any:
    """DynamoDB returns numbers as Decimal; give callers ints/floats back (recursively)."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _compact(item: dict[str, Any]) -> dict[str, Any]:
    """Drop attributes that carry nothing: absent attributes are free, empty ones are billed bytes."""
    return {k: v for k, v in item.items() if v is not None and v != [] and v != {} and v is not False}


# --- enumerations ----------------------------------------------------------------------------------

PRIORITIES = ("high", "default", "low")
MISFIRE_POLICIES = ("run_once", "run_all", "skip")
OVERLAP_POLICIES = ("allow", "skip", "buffer_one", "replace")
DST_GAP_POLICIES = ("shift", "skip")
DST_OVERLAP_POLICIES = ("first", "both")


class JobState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


class Trigger(StrEnum):
    SCHEDULE = "schedule"
    CATCHUP = "catchup"
    MANUAL = "manual"
    BACKFILL = "backfill"
    REPLAY = "replay"


ACTIVE_RUN_STATES = frozenset({RunState.QUEUED, RunState.RUNNING, RunState.RETRYING})
TERMINAL_RUN_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED})

ALLOWED_TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.SKIPPED}),
    RunState.RUNNING: frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED, RunState.RETRYING}),
    RunState.RETRYING: frozenset({RunState.RUNNING, RunState.CANCELLED, RunState.FAILED}),
    RunState.FAILED: frozenset({RunState.QUEUED}),
    RunState.SUCCEEDED: frozenset(),
    RunState.CANCELLED: frozenset(),
    RunState.SKIPPED: frozenset(),
}


def check_transition(old: RunState | str, new: RunState | str) -> None:
    """Raise :class:`ConflictError` unless ``old -> new`` is an allowed run state transition.

    ``queued -> running -> succeeded|failed|cancelled``, ``running -> retrying -> running``,
    ``queued -> cancelled|skipped``, ``failed -> queued`` (replay). ``retrying -> cancelled`` (cancel
    while waiting out a backoff) and ``retrying -> failed`` (a lost retry found exhausted by the sweeper)
    are allowed too.
    """
    try:
        old_state, new_state = RunState(old), RunState(new)
    except ValueError as exc:
        raise ConflictError(f"unknown run state in transition {old!r} -> {new!r}") from exc
    if new_state not in ALLOWED_TRANSITIONS[old_state]:
        allowed = ", ".join(sorted(ALLOWED_TRANSITIONS[old_state])) or "none (terminal state)"
        raise ConflictError(
            f"a {old_state} run cannot become {new_state}; allowed from {old_state}: {allowed}"
        )


# --- ids -----------------------------------------------------------------------------------------

_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NONCE_RE = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_KEY_TS_FORMAT = "%Y%m%dT%H%M%S"
_SUFFIX_CODES = {Trigger.MANUAL: "m", Trigger.BACKFILL: "b", Trigger.REPLAY: "r"}


def validate_job_id(job_id: str) -> str:
    """Job ids are URL-safe (``[A-Za-z0-9_-]``, 1–64 chars) and never contain ``.`` (the run id separator)."""
    if not isinstance(job_id, str) or not _ID_RE.match(job_id):
        raise ValidationError(f"invalid job id {job_id!r}: use 1-64 of A-Z a-z 0-9 _ -", field="job_id")
    return job_id


def run_key_for(scheduled_at: datetime) -> str:
    """``20261129T204500.123Z``: sorts by the scheduled instant, URL-safe, no colons."""
    utc = require_aware(scheduled_at).astimezone(UTC)
    return utc.strftime(_KEY_TS_FORMAT) + f".{utc.microsecond // 1000:03d}Z"


def make_run_id(
    job_id: str, scheduled_at: datetime, trigger: Trigger | str = Trigger.SCHEDULE, nonce: str | None = None
) -> str:
    """Run id ``<job_id>.<run_key>``, deterministic from (job id, scheduled instant).

    Scheduled and catch-up runs of one occurrence share an id, so a double tick or a retried dispatch
    hits the conditional put. Manual, backfill and replay runs add ``.<code><nonce>`` (``m``/``b``/``r``);
    a backfill without a nonce is idempotent per instant, manual and replay runs need a nonce.
    """
    validate_job_id(job_id)
    trig = Trigger(trigger)
    key = run_key_for(scheduled_at)
    if trig in (Trigger.SCHEDULE, Trigger.CATCHUP):
        if nonce is not None:
            raise ValidationError("scheduled runs have deterministic ids: no nonce allowed")
        return f"{job_id}.{key}"
    if nonce is None:
        if trig is not Trigger.BACKFILL:
            raise ValidationError(f"a {trig} run id needs a nonce")
        nonce = ""
    elif not _NONCE_RE.match(nonce):
        raise ValidationError(f"invalid nonce {nonce!r}: use 1-40 of A-Z a-z 0-9 _ -")
    return f"{job_id}.{key}.{_SUFFIX_CODES[trig]}{nonce}"


_RUN_ID_RE = re.compile(r"^([A-Za-z0-9_-]{1,64})\.(\d{8}T\d{6}\.\d{3}Z(?:\.[mbr][A-Za-z0-9_-]{0,40})?)$")


def parse_run_id(run_id: str) -> tuple[str, str]:
    """``run_id -> (job_id, run_key)``: the primary key of the run item, so a GetItem needs no index."""
    match = _RUN_ID_RE.match(run_id or "")
    if not match:
        raise ValidationError(f"invalid run id {run_id!r}", field="run_id")
    return match.group(1), match.group(2)


def scheduled_at_from_run_key(run_key: str) -> datetime:
    stamp = run_key[:19]
    base = datetime.strptime(stamp[:15], _KEY_TS_FORMAT).replace(tzinfo=UTC)
    return base + timedelta(milliseconds=int(stamp[16:19]))


def shard_for(job_id: str, shards: int) -> int:
    """Stable shard of a job: crc32 of its id modulo the shard count (Python's ``hash`` is salted)."""
    if shards < 1:
        raise ValidationError("shard count must be >= 1")
    return zlib.crc32(job_id.encode()) % shards


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
    timeout_seconds: int = 300
    retry: RetrySpec = field(default_factory=RetrySpec)
    misfire_policy: str = "run_once"
    misfire_grace_seconds: int = 60
    max_catchup: int = 100
    overlap_policy: str = "allow"
    dst_gap: str = "shift"
    dst_overlap: str = "first"
    jitter_seconds: int = 0
    description: str = ""

    def spec_fields(self) -> dict[str, Any]:
        """The definition part only (used to copy a spec into a :class:`Job`)."""
        return {f.name: getattr(self, f.name) for f in fields(JobSpec)}


@dataclass(kw_only=True)
class Job(JobSpec):
    """A stored job: its definition plus identity, lifecycle and the dispatcher's bookkeeping.

    ``next_due_at`` is the earliest occurrence not yet dispatched (``None`` when nothing is left);
    ``last_fired_at`` the latest scheduled instant a run was created for; ``last_run_id`` points at that
    run so the overlap policy needs one GetItem, not a query. ``fence`` is the highest shard-lease
    token that advanced the job (a stale dispatcher's lower token is refused).
    """

    id: str
    tenant: str
    state: JobState = JobState.ACTIVE
    version: int = 1
    shard: int = 0
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
            "timeout_seconds": self.timeout_seconds,
            "retry": {k: Decimal(str(v)) for k, v in self.retry.to_dict().items()},
            "misfire_policy": self.misfire_policy,
            "misfire_grace_seconds": self.misfire_grace_seconds,
            "max_catchup": self.max_catchup,
            "overlap_policy": self.overlap_policy,
            "dst_gap": self.dst_gap,
            "dst_overlap": self.dst_overlap,
            "jitter_seconds": self.jitter_seconds,
            "description": self.description or None,
            "state": str(self.state),
            "version": self.version,
            "shard": self.shard,
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
        }
        item.update(self.due_index_attributes())
        return _compact(item) | {"payload": self.payload}

    def due_index_attributes(self) -> dict[str, Any]:
        """Sparse due index keys: present only while the job is active and has something to decide.

        A job holding a buffered occurrence (overlap ``buffer_one``) stays due from that instant on, so
        every tick re-checks whether the previous run has finished and the buffered one can start.
        """
        if self.state is not JobState.ACTIVE:
            return {}
        candidates = [t for t in (self.next_due_at, self.buffered_at) if t is not None]
        if not candidates:
            return {}
        return {"due_shard": str(self.shard), "due_at": to_epoch_ms(min(candidates))}

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
            timeout_seconds=data.get("timeout_seconds", 300),
            retry=RetrySpec.from_dict(data.get("retry")),
            misfire_policy=data.get("misfire_policy", "run_once"),
            misfire_grace_seconds=data.get("misfire_grace_seconds", 60),
            max_catchup=data.get("max_catchup", 100),
            overlap_policy=data.get("overlap_policy", "allow"),
            dst_gap=data.get("dst_gap", "shift"),
            dst_overlap=data.get("dst_overlap", "first"),
            jitter_seconds=data.get("jitter_seconds", 0),
            description=data.get("description", ""),
            state=JobState(data.get("state", "active")),
            version=data.get("version", 1),
            shard=data.get("shard", 0),
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
        )


# --- runs ----------------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Attempt:
    """One execution attempt of a run (kept in the run item's ``attempts`` list)."""

    attempt: int
    started_at: datetime
    finished_at: datetime | None = None
    outcome: str | None = None  # succeeded | failed | retrying | timeout | cancelled | lost
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _compact(
            {
                "attempt": self.attempt,
                "started_at": to_iso(self.started_at),
                "finished_at": _opt_iso(self.finished_at),
                "outcome": self.outcome,
                "error": self.error,
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
        )


def tenant_sort_for(run_key: str, job_id: str) -> str:
    """Sort key of the tenant index: scheduled instant first, so a tenant's runs list newest-first."""
    return f"{run_key}#{job_id}"


@dataclass(kw_only=True)
class Run:
    """One occurrence of a job (or a manual/backfill/replay run) and its whole history.

    The item stays small (well under 1 KB for a cron run): no payload copy unless overridden (the payload
    travels in the SQS message), no empty attributes. ``tenant``/``tenant_sort`` are written once at
    creation and never change, so state transitions cost no tenant-index write.
    """

    id: str
    job_id: str
    tenant: str
    state: RunState = RunState.QUEUED
    trigger: Trigger = Trigger.SCHEDULE
    scheduled_at: datetime
    due_at: datetime
    priority: str = "default"
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

    @property
    def run_key(self) -> str:
        return parse_run_id(self.id)[1]

    def to_item(self) -> dict[str, Any]:
        item = {
            "job_id": self.job_id,
            "run_key": self.run_key,
            "tenant": self.tenant,
            "tenant_sort": tenant_sort_for(self.run_key, self.job_id),
            "state": str(self.state),
            "trigger": str(self.trigger),
            "scheduled_at": to_iso(self.scheduled_at),
            "due_at": to_iso(self.due_at),
            "priority": self.priority,
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
        )

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_RUN_STATES
