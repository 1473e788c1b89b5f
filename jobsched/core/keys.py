"""The vocabulary the data model is keyed on: instants, states and transitions, ids and shards.

Split from :mod:`jobsched.core.models` (which re-exports every public name here) to keep modules
small. Pure: no clock, no environment.
"""

from __future__ import annotations

import re
import zlib
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
