"""Ids: job ids, run ids (job + scheduled instant + trigger suffix), run keys, due partitions, shards.

Part of the data model's vocabulary (:mod:`jobsched.core.models` re-exports every public name). Pure.
"""

from __future__ import annotations

import re
import zlib
from datetime import UTC, datetime, timedelta

from jobsched.core.errors import ValidationError
from jobsched.core.instants import require_aware
from jobsched.core.states import Trigger

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
    # the year with 4 digits: strftime's %Y gives 174 for the year 174 (a backfill from 0174-01-01
    # made run ids that run_id_of then refused, found by schemathesis)
    return f"{utc.year:04d}" + utc.strftime(_KEY_TS_FORMAT[2:]) + f".{utc.microsecond // 1000:03d}Z"


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


#: A workflow node's run adds ``.n<node id>`` to its workflow run's key (:mod:`jobsched.core.dag`).
_RUN_ID_RE = re.compile(
    r"^([A-Za-z0-9_-]{1,64})\.(\d{8}T\d{6}\.\d{3}Z(?:\.[mbr][A-Za-z0-9_-]{0,40})?(?:\.n[A-Za-z0-9_-]{1,64})?)$"
)


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


#: Virtual partitions of the due index, fixed forever (docs/decisions/0016-due-partitions.md): a job's
#: partition depends on its id alone, so changing the shard count moves no item. It also bounds the
#: shard count: a shard owns at least one partition.
DUE_PARTITIONS = 32
#: The due index's partition key value of partition ``p``; a bare number is the shard of a job indexed
#: before partitions (``LEGACY_MAX_SHARDS`` was the highest shard count a deployment could have then).
PARTITION_PREFIX = "p"
LEGACY_MAX_SHARDS = 256


def partition_for(job_id: str) -> int:
    """Stable due partition of a job: crc32 of its id modulo :data:`DUE_PARTITIONS` (``hash`` is salted)."""
    return zlib.crc32(job_id.encode()) % DUE_PARTITIONS


def partition_key(partition: int) -> str:
    """The due index key of ``partition``: ``p7``."""
    return f"{PARTITION_PREFIX}{partition}"


def validate_shard_count(shards: int) -> int:
    """1 <= shards <= :data:`DUE_PARTITIONS` (a shard with no partition would tick for nothing)."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= DUE_PARTITIONS:
        raise ValidationError(
            f"shard count must be an integer in 1..{DUE_PARTITIONS} (the due partitions), got {shards!r}",
            field="shards",
        )
    return shards


def partitions_of(shard: int, shards: int) -> list[int]:
    """The due partitions shard ``shard`` of ``shards`` owns: ``p % shards == shard``."""
    validate_shard_count(shards)
    if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < shards:
        raise ValidationError(f"shard must be an integer in 0..{shards - 1}, got {shard!r}", field="shard")
    return list(range(shard, DUE_PARTITIONS, shards))


def legacy_keys_of(shard: int, shards: int) -> list[str]:
    """Due index keys of jobs indexed before partitions that shard ``shard`` of ``shards`` drains: the
    bare shard numbers ``j`` below :data:`LEGACY_MAX_SHARDS` with ``j % shards == shard``."""
    return [str(j) for j in range(shard, LEGACY_MAX_SHARDS, shards)]


def shard_for(job_id: str, shards: int) -> int:
    """The shard that owns a job when there are ``shards``: the owner of its due partition."""
    validate_shard_count(shards)
    return partition_for(job_id) % shards
