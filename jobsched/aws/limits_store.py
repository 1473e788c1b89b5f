"""Concurrency semaphores and token buckets in the Leases table (docs/decisions/0022-limits.md).

**Semaphore** (``lease_key = "sem#<tenant>#<key>"``, or ``"sem#<tenant>"`` for the tenant's own
limit): ``holders`` maps each holder (``<run id>@<worker>``) to its lease end (epoch ms); ``waiters``
maps a waiting run to ``{"t": registered ms, "x": lapses ms, "q": queue URL, "r": receipt handle}``.
Every change is one conditional ``UpdateItem`` on that item, so racing workers are serialized by
DynamoDB:

* acquire: ``SET holders.<h>`` if ``size(holders) < limit`` (or ``h`` holds already); when full, the
  refusal returns the item (no extra read) and, if some holders' leases have ended, one more write
  removes exactly those (each condition-checked on its lease end) and takes the slot;
* still full: the run registers as a waiter (conditional on the semaphore still being full, so a
  release in between cannot be missed) and its message is hidden until the first holder's lease ends;
* release: ``REMOVE holders.<h>``, returning the new item; if a waiter is registered, one conditional
  write takes the oldest off the map and the caller makes its message visible at once;
* renew (the run's heartbeat): ``SET holders.<h>`` if it is still there (else a fresh acquire).

**Bucket** (``lease_key = "bucket#<tenant>#<key>"``, ``"bucket#<tenant>"`` for the tenant's rate):
``tat`` (epoch ms, GCRA, :mod:`jobsched.core.limits`). Taking a token is one write: a bucket in use
(``tat`` at or past now) is moved one interval on by an atomic ``SET tat = tat + :interval`` conditioned
only on ``tat >= :now``, so racing takers never conflict: DynamoDB serializes the increments and each
taker reads its own slot from the new value it gets back; an idle bucket (``tat`` before now, or no
item) is set to ``now + interval`` conditioned on still being idle. Whichever of the two this container
last saw is tried first; a refusal means the bucket changed between the two cases and the other write
is tried (at most 4 rounds, then the run waits a second and asks again).

**Pool ceiling** (``lease_key = "pool#<queue>"``, decision 0057): ``ceiling`` (the pool's
``MaximumConcurrency`` as the capacity function set it), ``set_at`` (epoch ms, when it was set) and
``until`` (epoch ms, how long it is in force unless renewed). The capacity function writes it
(:class:`PoolCeilingItems`); a fair share's gate reads it with the tenant's share item in one
eventually consistent ``BatchGetItem`` (:meth:`Semaphores.look`). Missing or lapsed: the base.

Items carry ``expires_at`` a day past their last write (the table's TTL removes idle ones).
"""

from __future__ import annotations

import logging
import math
from datetime import datetime
from typing import Any

from jobsched.aws.metering import ConditionFailed
from jobsched.aws.sizing import read_units
from jobsched.core.limits import RateSpec, book, expired_holders, oldest_waiter, slot_frees_in
from jobsched.ports.stores import PoolCeiling, Refusal, Waiter
from jobsched.ports.tables import Table

logger = logging.getLogger(__name__)

#: Waiters one semaphore item registers; more waiting runs re-check when the first lease ends.
MAX_WAITERS = 10
DAY_SECONDS = 86400
_ROUNDS = 4
#: How long a written pool ceiling stays in force without a renewal: five of the capacity function's
#: one-minute ticks (it renews a raised ceiling at each), so a stopped function's raise lapses to the
#: base within five minutes.
POOL_CEILING_LEASE_SECONDS = 300.0


def epoch_ms(now: datetime) -> int:
    return int(now.timestamp() * 1000)


def semaphore_key(tenant: str, key: str | None) -> str:
    return f"sem#{tenant}" if key is None else f"sem#{tenant}#{key}"


def share_key(queue: str, tenant: str) -> str:
    """The item counting ``tenant``'s invocations on ``queue``'s pool (fair shares, decision 0057)."""
    return f"share#{queue}#{tenant}"


def pool_key(queue: str) -> str:
    """The item holding ``queue``'s pool ceiling as the capacity function set it (decision 0057)."""
    return f"pool#{queue}"


def bucket_key(tenant: str, key: str | None) -> str:
    return f"bucket#{tenant}" if key is None else f"bucket#{tenant}#{key}"


class Semaphores:
    """Acquire, renew and release slots of counting semaphores (metered client, Leases table)."""

    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table

    def _update(self, key: str, expression: str, condition: str, names: dict, values: dict) -> dict[str, Any]:
        return self.dynamo.update(
            self.table, {"lease_key": key}, expression, condition=condition, names=names, values=values
        )

    def acquire(
        self,
        key: str,
        holder: str,
        limit: int,
        now: datetime,
        lease_seconds: float,
        *,
        waiter: tuple[str, str, str] | None = None,
    ) -> Refusal | None:
        """Take a slot of ``key`` for ``holder`` until ``now + lease_seconds``; None when taken, else a
        :class:`Refusal`. ``waiter`` = (run id, queue URL, receipt handle) registers the run to be
        woken by a release when the semaphore is full."""
        now_ms = epoch_ms(now)
        until = now_ms + int(lease_seconds * 1000)
        expires = int(now.timestamp()) + DAY_SECONDS
        for _ in range(_ROUNDS):
            try:
                self._update(
                    key,
                    "SET holders.#h = :until, expires_at = :exp" + (" REMOVE waiters.#w" if waiter else ""),
                    "attribute_exists(holders) AND (attribute_exists(holders.#h) OR size(holders) < :limit)",
                    {"#h": holder, **({"#w": waiter[0]} if waiter else {})},
                    {":until": until, ":exp": expires, ":limit": limit},
                )
                return None
            except ConditionFailed as failed:
                item = failed.existing
            if item is None or "holders" not in item:
                if self._create(key, holder, until, expires):
                    return None
                continue
            holders = item.get("holders", {})
            expired = expired_holders(holders, now_ms)
            expired.pop(holder, None)
            if expired:
                if self._prune_and_take(key, holder, limit, expired, until, expires, waiter):
                    return None
                continue
            if waiter is None:
                return Refusal(slot_frees_in(holders, now_ms), registered=False)
            registered = self._register(key, limit, waiter, item.get("waiters", {}), now_ms, until)
            if registered is None:
                continue  # a slot freed between the refusal and the registration: try again
            return Refusal(slot_frees_in(holders, now_ms), registered=registered)
        return Refusal(1.0, registered=False)

    def _create(self, key: str, holder: str, until: int, expires: int) -> bool:
        try:
            self._update(
                key,
                "SET holders = :one, waiters = if_not_exists(waiters, :none), expires_at = :exp",
                "attribute_not_exists(holders)",
                {},
                {":one": {holder: until}, ":none": {}, ":exp": expires},
            )
            return True
        except ConditionFailed:
            return False

    def _prune_and_take(
        self,
        key: str,
        holder: str,
        limit: int,
        expired: dict[str, int],
        until: int,
        expires: int,
        waiter: tuple[str, str, str] | None,
    ) -> bool:
        names: dict[str, str] = {"#h": holder}
        values: dict[str, Any] = {":until": until, ":exp": expires, ":room": limit + len(expired)}
        removes, checks = [], []
        for i, (name, lease_end) in enumerate(expired.items()):
            names[f"#e{i}"] = name
            values[f":e{i}"] = lease_end
            removes.append(f"holders.#e{i}")
            checks.append(f"holders.#e{i} = :e{i}")
        if waiter is not None:
            names["#w"] = waiter[0]
            removes.append("waiters.#w")
        try:
            self._update(
                key,
                f"SET holders.#h = :until, expires_at = :exp REMOVE {', '.join(removes)}",
                " AND ".join([*checks, "size(holders) < :room"]),
                names,
                values,
            )
            return True
        except ConditionFailed:
            return False

    def _register(
        self,
        key: str,
        limit: int,
        waiter: tuple[str, str, str],
        waiters: dict[str, Any],
        now_ms: int,
        lapses: int,
    ) -> bool | None:
        """Register ``waiter`` while the semaphore is still full: True registered, False the waiters'
        map is full (not registered), None the semaphore has room now (acquire again)."""
        run_id, queue_url, receipt = waiter
        lapsed = [w for w, entry in waiters.items() if int(entry.get("x", 0)) <= now_ms and w != run_id]
        live = len(waiters) - len(lapsed) - (1 if run_id in waiters else 0)
        if live >= MAX_WAITERS:
            return False
        names = {"#w": run_id, **{f"#l{i}": w for i, w in enumerate(lapsed)}}
        remove = (" REMOVE " + ", ".join(f"waiters.#l{i}" for i in range(len(lapsed)))) if lapsed else ""
        entry = {"t": now_ms, "x": lapses, "q": queue_url, "r": receipt}
        try:
            self._update(
                key,
                f"SET waiters.#w = :entry{remove}",
                "size(holders) >= :limit",
                names,
                {":entry": entry, ":limit": limit},
            )
            return True
        except ConditionFailed:
            return None

    def renew(self, key: str, holder: str, limit: int, now: datetime, lease_seconds: float) -> bool:
        """Extend ``holder``'s lease; if its entry is gone (its lease ended and another run took the
        slot), take a slot again if there is one. False: the holder runs without a slot (logged)."""
        until = epoch_ms(now) + int(lease_seconds * 1000)
        try:
            self._update(
                key,
                "SET holders.#h = :until",
                "attribute_exists(holders.#h)",
                {"#h": holder},
                {":until": until},
            )
            return True
        except ConditionFailed:
            pass
        if self.acquire(key, holder, limit, now, lease_seconds) is None:
            return True
        logger.warning("slot of %s on %s was lost and the semaphore is full", holder, key)
        return False

    def release(self, key: str, holder: str, now: datetime) -> Waiter | None:
        """Free ``holder``'s slot at once; return the oldest registered waiter, taken off the map by
        this call alone (the caller makes its message visible), or None."""
        try:
            item = self._update(key, "REMOVE holders.#h", "attribute_exists(holders.#h)", {"#h": holder}, {})
        except ConditionFailed:
            return None  # not held (already released, or expired and taken): nothing freed by us
        waiters = item.get("waiters") or {}
        now_ms = epoch_ms(now)
        for _ in range(_ROUNDS):
            name = oldest_waiter(waiters, now_ms)
            if name is None:
                return None
            entry = waiters[name]
            try:
                self._update(
                    key, "REMOVE waiters.#w", "waiters.#w.t = :t", {"#w": name}, {":t": int(entry["t"])}
                )
            except ConditionFailed as failed:  # woken by another release, or re-registered: look again
                waiters = (failed.existing or {}).get("waiters") or {}
                continue
            return Waiter(run_id=name, queue_url=str(entry["q"]), receipt_handle=str(entry["r"]))
        return None

    def peek(self, key: str) -> dict[str, int]:
        """The semaphore's holders as stored, read eventually consistent (half a read unit): what a
        fair share's admission looks at before it decides whether to register (decision 0057)."""
        item = self.dynamo.get(self.table, {"lease_key": key}) or {}
        return {h: int(v) for h, v in (item.get("holders") or {}).items()}

    def look(self, key: str, pool: str) -> tuple[dict[str, int], PoolCeiling | None]:
        """The semaphore's holders and ``pool``'s ceiling item (:func:`pool_key`), in one eventually
        consistent ``BatchGetItem`` (half a read unit per item): what a fair share's admission reads
        when its tenants' slots follow the capacity function's ceilings (decision 0057)."""
        holders: dict[str, int] = {}
        ceiling: PoolCeiling | None = None
        keys = [{"lease_key": key}, {"lease_key": pool_key(pool)}]
        found = self.dynamo.batch_get(self.table, keys, metered=False)
        # DynamoDB bills each key of a batch as a GetItem, found or not (the unit minimum: both items
        # are far under 4 KB); the batch's own metering would count only the items found.
        self.dynamo.meter.record_dynamodb(
            "BatchGetItem", rcu=len(keys) * read_units(0, consistent=False), table=self.table
        )
        for item in found:
            if item.get("lease_key") == key:
                holders = {h: int(v) for h, v in (item.get("holders") or {}).items()}
            else:
                ceiling = pool_ceiling_of(item)
        return holders, ceiling

    def holders(self, key: str) -> dict[str, int]:
        """The semaphore's holders as stored (strongly consistent; for tests and operators)."""
        item = self.dynamo.get(self.table, {"lease_key": key}, consistent=True) or {}
        return {h: int(v) for h, v in (item.get("holders") or {}).items()}


def pool_ceiling_of(item: dict[str, Any] | None) -> PoolCeiling | None:
    """A pool ceiling item as stored (None when there is none)."""
    if not item or "ceiling" not in item:
        return None
    return PoolCeiling(int(item["ceiling"]), int(item.get("set_at", 0)), int(item.get("until", 0)))


class PoolCeilingItems:
    """Writes each pool's ceiling item (:func:`pool_key`) for the fair share's gate: one ``UpdateItem``
    per call. ``changed``: the ceiling was just set (``set_at`` becomes now); else a renewal (``set_at``
    kept). Each write puts ``until`` ``lease_seconds`` on."""

    def __init__(self, dynamo: Table, table: str, lease_seconds: float = POOL_CEILING_LEASE_SECONDS):
        self.dynamo = dynamo
        self.table = table
        self.lease_seconds = lease_seconds

    def record(self, kind: str, ceiling: int, now: datetime, *, changed: bool) -> None:
        now_ms = epoch_ms(now)
        set_at = "#s = :now" if changed else "#s = if_not_exists(#s, :now)"
        self.dynamo.update(
            self.table,
            {"lease_key": pool_key(kind)},
            f"SET #c = :c, #u = :until, expires_at = :exp, {set_at}",
            names={"#c": "ceiling", "#u": "until", "#s": "set_at"},
            values={
                ":c": ceiling,
                ":until": now_ms + int(self.lease_seconds * 1000),
                ":exp": int(now.timestamp()) + DAY_SECONDS,
                ":now": now_ms,
            },
        )

    def read(self, kind: str) -> PoolCeiling | None:
        """The item as stored (strongly consistent; for tests and operators)."""
        return pool_ceiling_of(self.dynamo.get(self.table, {"lease_key": pool_key(kind)}, consistent=True))


class Buckets:
    """Token buckets (GCRA) over the Leases table: one conditional write per token taken."""

    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table
        #: The last ``tat`` this container saw per bucket: the guess the first write is conditioned on.
        self._seen: dict[str, int | None] = {}

    def take(self, key: str, spec: RateSpec, now: datetime) -> float | None:
        """Take one token of ``key`` at ``now``; return the seconds until the run's booked start (0 or
        more: the token is taken, the run may start then), or None if the bucket kept changing between
        idle and in use under this write (the caller waits a second and tries again)."""
        now_ms = epoch_ms(now)
        step = math.ceil(spec.interval_ms)
        expires = int(now.timestamp()) + DAY_SECONDS
        seen = self._seen.get(key)
        in_use = seen is not None and seen >= now_ms
        for _ in range(_ROUNDS):
            try:
                if in_use:
                    item = self.dynamo.update(
                        self.table,
                        {"lease_key": key},
                        "SET tat = tat + :step, expires_at = :exp",
                        condition="tat >= :now",
                        values={":step": step, ":now": now_ms, ":exp": expires},
                    )
                    new_tat = int(item["tat"])
                    booking = book(spec, new_tat - step, now_ms)
                else:
                    booking = book(spec, None, now_ms)
                    new_tat = booking.new_tat
                    self.dynamo.update(
                        self.table,
                        {"lease_key": key},
                        "SET tat = :new, expires_at = :exp",
                        condition="attribute_not_exists(tat) OR tat < :now",
                        values={":new": new_tat, ":now": now_ms, ":exp": expires},
                    )
            except ConditionFailed as failed:
                stored = (failed.existing or {}).get("tat")
                in_use = stored is not None and int(stored) >= now_ms
                continue
            self._seen[key] = new_tat
            return booking.delay_seconds(now_ms)
        self._seen[key] = None
        return None
