"""Shard leases with fencing tokens (Leases table, ``lease_key = "shard#<k>"``).

A dispatcher tick acquires its shard's lease with one conditional write that succeeds when the lease
is free, expired, or already held by the same owner, and increments ``token``. The token is the
fence: the dispatcher re-checks it before advancing jobs, and writes it onto every job it advances
(``fence``), so a dispatcher that stalled past its lease — and was overtaken by one holding a higher
token — can neither advance a job the new holder touched nor pass the re-check.

A shard lease also carries ``legacy_until``, the end of the window in which the shard's ticks re-key
jobs indexed before due partitions (docs/decisions/0016-due-partitions.md): acquired with a
``legacy_window``, a lease item that existed before (written by a version without partitions) gets
``now + legacy_window`` the first time, a lease item created now gets ``now`` (no window: nothing
older can exist for it). Either way the value is written once and kept.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.metering import ConditionFailed
from jobsched.core.errors import LeaseLostError
from jobsched.core.models import from_iso, require_aware, to_iso
from jobsched.ports.stores import Lease, LeaseHeldError
from jobsched.ports.tables import Table

DEFAULT_LEASE_SECONDS = 60


def shard_lease_key(shard: int) -> str:
    return f"shard#{shard}"


class _Absent(Exception):
    """The lease item does not exist (yet): take it with the creation condition."""


class Leases:
    """Acquire, check and release leases in the Leases table."""

    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table

    def acquire(
        self,
        key: str,
        owner: str,
        now: datetime,
        ttl: timedelta | None = None,
        *,
        legacy_window: timedelta | None = None,
    ) -> Lease:
        """Take (or renew) ``key`` for ``owner`` until ``now + ttl``; the token goes up by one every time.

        With ``legacy_window`` the lease's ``legacy_until`` is set once (see the module docstring): one
        request as without it, plus one refused conditional write the very first time a key is taken.
        Raises :class:`LeaseHeldError` when another owner holds an unexpired lease.
        """
        require_aware(now, "now")
        until = now + (ttl or timedelta(seconds=DEFAULT_LEASE_SECONDS))
        expression = "SET #owner = :owner, lease_until = :until, expires_at = :exp ADD #token :one"
        free = "lease_until <= :now OR #owner = :owner"
        values = {
            ":owner": owner,
            ":until": to_iso(until),
            ":now": to_iso(now),
            ":one": 1,
            # Keep expired lease rows around for a day (the token must survive between ticks).
            ":exp": int((until + timedelta(days=1)).timestamp()),
        }
        if legacy_window is None:
            item = self._take(key, expression, f"attribute_not_exists(lease_key) OR {free}", values)
        else:
            with_window = expression.replace(
                " ADD", ", legacy_until = if_not_exists(legacy_until, :legacy) ADD"
            )
            try:
                item = self._take(
                    key,
                    with_window,
                    f"attribute_exists(lease_key) AND ({free})",
                    {**values, ":legacy": to_iso(now + legacy_window)},
                    absent_ok=True,
                )
            except _Absent:
                fresh = {k: v for k, v in values.items() if k != ":now"} | {":legacy": to_iso(now)}
                item = self._take(key, with_window, "attribute_not_exists(lease_key)", fresh)
        legacy = item.get("legacy_until")
        return Lease(
            key=key,
            owner=owner,
            token=int(item["token"]),
            until=from_iso(item["lease_until"]),
            legacy_until=from_iso(legacy) if legacy else None,
        )

    def _take(
        self, key: str, expression: str, condition: str, values: dict[str, Any], *, absent_ok: bool = False
    ) -> dict[str, Any]:
        try:
            return self.dynamo.update(
                self.table,
                {"lease_key": key},
                expression,
                condition=condition,
                names={"#owner": "owner", "#token": "token"},
                values=values,
            )
        except ConditionFailed as failed:
            if failed.existing is None and absent_ok:
                raise _Absent from None
            holder = (failed.existing or {}).get("owner", "another owner")
            raise LeaseHeldError(f"lease {key} is held by {holder}") from None

    def check(self, lease: Lease, now: datetime) -> None:
        """Raise :class:`LeaseLostError` unless ``lease`` is still ours (same token) and unexpired."""
        item = self.dynamo.get(self.table, {"lease_key": lease.key}, consistent=True)
        if item is None or int(item["token"]) != lease.token or item.get("owner") != lease.owner:
            raise LeaseLostError(f"lease {lease.key} token {lease.token} was taken over")
        if from_iso(item["lease_until"]) <= now:
            raise LeaseLostError(f"lease {lease.key} token {lease.token} expired at {item['lease_until']}")

    def release(self, lease: Lease, now: datetime) -> bool:
        """End the lease early (so the next tick need not wait for expiry); False if it was not ours."""
        try:
            self.dynamo.update(
                self.table,
                {"lease_key": lease.key},
                "SET lease_until = :now",
                condition="#token = :token AND #owner = :owner",
                names={"#token": "token", "#owner": "owner"},
                values={":now": to_iso(now), ":token": lease.token, ":owner": lease.owner},
            )
        except ConditionFailed:
            return False
        return True
