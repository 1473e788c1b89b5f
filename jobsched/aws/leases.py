"""Shard leases with fencing tokens (Leases table, ``lease_key = "shard#<k>"``).

A dispatcher tick acquires its shard's lease with one conditional write that succeeds when the lease
is free, expired, or already held by the same owner, and increments ``token``. The token is the
fence: the dispatcher re-checks it before advancing jobs, and writes it onto every job it advances
(``fence``), so a dispatcher that stalled past its lease — and was overtaken by one holding a higher
token — can neither advance a job the new holder touched nor pass the re-check.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobsched.aws.metering import ConditionFailed, Dynamo
from jobsched.core.errors import ConflictError, LeaseLostError
from jobsched.core.models import from_iso, require_aware, to_iso

DEFAULT_LEASE_SECONDS = 60


def shard_lease_key(shard: int) -> str:
    return f"shard#{shard}"


@dataclass(frozen=True)
class Lease:
    key: str
    owner: str
    token: int
    until: datetime


class LeaseHeldError(ConflictError):
    """Raised when a lease is held by another owner and has not expired yet."""

    code = "lease_held"


class Leases:
    """Acquire, check and release leases in the Leases table."""

    def __init__(self, dynamo: Dynamo, table: str):
        self.dynamo = dynamo
        self.table = table

    def acquire(self, key: str, owner: str, now: datetime, ttl: timedelta | None = None) -> Lease:
        """Take (or renew) ``key`` for ``owner`` until ``now + ttl``; the token goes up by one every time.

        Raises :class:`LeaseHeldError` when another owner holds an unexpired lease.
        """
        require_aware(now, "now")
        until = now + (ttl or timedelta(seconds=DEFAULT_LEASE_SECONDS))
        try:
            item = self.dynamo.update(
                self.table,
                {"lease_key": key},
                "SET #owner = :owner, lease_until = :until, expires_at = :exp ADD #token :one",
                condition="attribute_not_exists(lease_key) OR lease_until <= :now OR #owner = :owner",
                names={"#owner": "owner", "#token": "token"},
                values={
                    ":owner": owner,
                    ":until": to_iso(until),
                    ":now": to_iso(now),
                    ":one": 1,
                    # Keep expired lease rows around for a day (the token must survive between ticks).
                    ":exp": int((until + timedelta(days=1)).timestamp()),
                },
            )
        except ConditionFailed as failed:
            holder = (failed.existing or {}).get("owner", "another owner")
            raise LeaseHeldError(f"lease {key} is held by {holder}") from None
        return Lease(key=key, owner=owner, token=int(item["token"]), until=from_iso(item["lease_until"]))

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
