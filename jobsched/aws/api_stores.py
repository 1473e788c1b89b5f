"""The API's records in the Leases table: ``Idempotency-Key`` claims, principal mappings, job counts.

Each store takes a :class:`~jobsched.ports.tables.Table` (or a boto3 DynamoDB client, wrapped in one)
and the table's name. What the records mean and how the API uses them: :mod:`jobsched.api.idempotency`,
:mod:`jobsched.api.tenants`, :mod:`jobsched.api.quotas`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.metering import Dynamo
from jobsched.core.errors import ConflictError, NotFoundError
from jobsched.core.instants import to_iso
from jobsched.ports.api import (
    Claim,
    IdempotencyKeyReusedError,
    JobQuotaExceededError,
    StoredResponse,
)
from jobsched.ports.tables import ConditionFailed, Table

#: How long an ``Idempotency-Key`` (and a deleted job's tombstone) is remembered.
TTL = timedelta(hours=24)
#: Longer than the api function may run (29 s), so a claim is never taken from a request still running.
LOCK_SECONDS = 60
PRINCIPAL_PREFIX = "principal#"
JOB_COUNT_PREFIX = "jobcount#"
DEFAULT_MAX_JOBS_PER_TENANT = 10_000
ENV_MAX_JOBS_PER_TENANT = "JOBSCHED_MAX_JOBS_PER_TENANT"


class IdempotencyStore:
    """The records, in a table with a string partition key and an epoch-seconds TTL attribute."""

    def __init__(
        self, dynamodb: Any, table: str, *, key_attribute: str = "id", ttl_attribute: str = "expiration"
    ):
        self._db: Table = Dynamo.of(dynamodb)
        self._table = table
        self._key = key_attribute
        self._ttl = ttl_attribute

    def _id(self, tenant: str, key: str) -> str:
        return f"api#{tenant}#{hashlib.sha256(key.encode()).hexdigest()}"

    def _record_key(self, tenant: str, key: str) -> dict[str, Any]:
        return {self._key: self._id(tenant, key)}

    def begin(
        self, tenant: str, key: str, digest: str, now: datetime, *, job_id: str
    ) -> Claim | StoredResponse:
        """Claim ``key`` for this request, or return the stored response to answer again.

        ``job_id`` is the id a new claim fixes for the job; a claim taken over keeps the id it holds.
        """
        epoch = int(now.timestamp())
        try:
            self._db.put(
                self._table,
                {
                    **self._record_key(tenant, key),
                    "state": "in_progress",
                    "fingerprint": digest,
                    "job_id": job_id,
                    "locked_until": epoch + LOCK_SECONDS,
                    self._ttl: epoch + int(TTL.total_seconds()),
                },
                condition="attribute_not_exists(#k) OR #ttl < :now",
                names={"#k": self._key, "#ttl": self._ttl},
                values={":now": epoch},
            )
            return Claim(job_id=job_id, resumed=False)
        except ConditionFailed as failed:
            item = failed.existing
        if item is None:  # DynamoDB returns the stored record with the failure; read it if it did not
            item = self._db.get(self._table, self._record_key(tenant, key), consistent=True)
        if item is None:  # released meanwhile: the caller may simply retry
            raise ConflictError("Idempotency-Key: a request with this key just finished failing; retry")
        if item["fingerprint"] != digest:
            raise IdempotencyKeyReusedError(
                "Idempotency-Key: this key was used with a different request body; use a new key"
            )
        if item["state"] == "completed":
            return StoredResponse(status=int(item["status"]), body=json.loads(item["body"]))
        if int(item["locked_until"]) >= epoch:
            raise ConflictError(
                "Idempotency-Key: a request with this key is still in progress; retry shortly"
            )
        return self._take_over(tenant, key, item, epoch, job_id)

    def _take_over(self, tenant: str, key: str, item: dict[str, Any], epoch: int, job_id: str) -> Claim:
        """Lock a lapsed claim for this request; of two retries racing for it, one wins, one gets 409."""
        kept = str(item.get("job_id", job_id))  # a record from before claims held a job id
        try:
            self._db.update(
                self._table,
                self._record_key(tenant, key),
                "SET locked_until = :lock, job_id = :job",
                condition="#state = :progress AND locked_until = :seen AND fingerprint = :fp",
                names={"#state": "state"},
                values={
                    ":lock": epoch + LOCK_SECONDS,
                    ":job": kept,
                    ":progress": "in_progress",
                    ":seen": item["locked_until"],
                    ":fp": item["fingerprint"],
                },
            )
        except ConditionFailed:
            raise ConflictError(
                "Idempotency-Key: a request with this key is still in progress; retry shortly"
            ) from None
        return Claim(job_id=kept, resumed=True)

    def complete(self, tenant: str, key: str, status: int, body: Any) -> None:
        """Store the final response for the key (a record gone meanwhile, its 24 h over, stays gone)."""
        try:
            self._db.update(
                self._table,
                self._record_key(tenant, key),
                "SET #state = :done, #status = :status, #body = :body",
                condition="attribute_exists(fingerprint)",
                names={"#state": "state", "#status": "status", "#body": "body"},
                values={
                    ":done": "completed",
                    ":status": status,
                    ":body": json.dumps(body, separators=(",", ":")),
                },
            )
        except ConditionFailed:
            pass

    def release(self, tenant: str, key: str) -> None:
        """Forget the claim of a request that was refused before it wrote anything."""
        self._db.delete(self._table, self._record_key(tenant, key))

    def unlock(self, tenant: str, key: str) -> None:
        """Lift the lock of a request that failed without knowing whether its job was written: a retry
        takes the claim over at once and finds the job, or creates it, under the same id."""
        try:
            self._db.update(
                self._table,
                self._record_key(tenant, key),
                "SET locked_until = :open",
                condition="#state = :progress",
                names={"#state": "state"},
                values={":open": 0, ":progress": "in_progress"},
            )
        except ConditionFailed:
            pass

    # --- tombstones of deleted jobs -------------------------------------------------------------

    def _tombstone_key(self, tenant: str, job_id: str) -> dict[str, Any]:
        return {self._key: f"apidel#{tenant}#{job_id}"}

    def record_deletion(self, tenant: str, job_id: str, now: datetime) -> None:
        """Remember for :data:`TTL` that the job is (being) deleted, so that a create retried under a
        claim that still holds this job id does not create it again (written before the delete)."""
        expires = int(now.timestamp()) + int(TTL.total_seconds())
        self._db.put(self._table, {**self._tombstone_key(tenant, job_id), self._ttl: expires})

    def was_deleted(self, tenant: str, job_id: str, now: datetime) -> bool:
        item = self._db.get(self._table, self._tombstone_key(tenant, job_id), consistent=True)
        return item is not None and int(item[self._ttl]) >= int(now.timestamp())


class PrincipalStore:
    """Principal -> tenant mappings under ``lease_key = "principal#<principal>"`` (no TTL).

    :meth:`resolve` runs on every IAM request, so its answers are kept for ``cache_seconds`` (per
    container): a changed or removed mapping takes effect within that time, and a busy caller costs
    one read a minute instead of one per request. ``monotonic`` is injectable for tests."""

    def __init__(
        self,
        dynamodb: Any,
        table_name: str,
        *,
        cache_seconds: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self._db: Table = Dynamo.of(dynamodb)
        self._table = table_name
        self._cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._cache: dict[tuple[str, ...], tuple[float, str | None]] = {}

    def put(self, principal: str, tenant: str, *, now: datetime) -> dict[str, str]:
        """Map (or re-map) a principal to a tenant; returns the stored mapping. (This container's
        cache is cleared; other containers see the change within ``cache_seconds``.)"""
        self._cache.clear()
        updated_at = to_iso(now)
        item = {"lease_key": PRINCIPAL_PREFIX + principal, "tenant": tenant, "updated_at": updated_at}
        self._db.put(self._table, item)
        return {"principal": principal, "tenant": tenant, "updated_at": updated_at}

    def delete(self, principal: str) -> None:
        """Remove a mapping; :class:`NotFoundError` when there is none."""
        self._cache.clear()
        try:
            self._db.delete(
                self._table,
                {"lease_key": PRINCIPAL_PREFIX + principal},
                condition="attribute_exists(lease_key)",
            )
        except ConditionFailed as error:
            raise NotFoundError(f"principal {principal} is not mapped") from error

    def resolve(self, candidates: Sequence[str]) -> str | None:
        """The tenant of the most specific mapped candidate, or ``None`` (cached, see the class)."""
        unique = list(dict.fromkeys(candidates))[:100]
        if not unique:
            return None
        key, now = tuple(unique), self._monotonic()
        cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self._cache_seconds:
            return cached[1]
        tenant = self._lookup(unique)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key] = (now, tenant)
        return tenant

    def _lookup(self, unique: list[str]) -> str | None:
        keys = [{"lease_key": PRINCIPAL_PREFIX + c} for c in unique]
        found = {
            str(item["lease_key"]).removeprefix(PRINCIPAL_PREFIX): str(item["tenant"])
            for item in self._db.batch_get(self._table, keys)
        }
        for candidate in unique:
            if candidate in found:
                return found[candidate]
        return None

    def list(self) -> list[dict[str, str]]:
        """Every mapping, sorted by principal (an admin view; the mapping is small)."""
        items = self._db.scan_all(
            self._table,
            filter_expression="begins_with(lease_key, :prefix)",
            values={":prefix": PRINCIPAL_PREFIX},
        )
        mappings = [
            {
                "principal": str(item["lease_key"]).removeprefix(PRINCIPAL_PREFIX),
                "tenant": str(item["tenant"]),
                "updated_at": str(item.get("updated_at", "")),
            }
            for item in items
        ]
        return sorted(mappings, key=lambda i: i["principal"])


class JobQuota:
    """The per-tenant job counter: ``lease_key = "jobcount#<tenant>"``, attribute ``jobs``, no TTL."""

    def __init__(self, dynamodb: Any, table: str, limit: int = DEFAULT_MAX_JOBS_PER_TENANT):
        if limit < 1:
            raise ValueError(f"{ENV_MAX_JOBS_PER_TENANT} must be >= 1, got {limit}")
        self._db: Table = Dynamo.of(dynamodb)
        self._table = table
        self.limit = limit

    def _key(self, tenant: str) -> dict[str, Any]:
        return {"lease_key": JOB_COUNT_PREFIX + tenant}

    def take(self, tenant: str) -> None:
        """Count one more job for ``tenant``; :class:`JobQuotaExceededError` at the limit."""
        try:
            self._db.update(
                self._table,
                self._key(tenant),
                "ADD jobs :one",
                condition="attribute_not_exists(jobs) OR jobs < :limit",
                values={":one": 1, ":limit": self.limit},
            )
        except ConditionFailed:
            raise JobQuotaExceededError(
                f"this tenant has {self.limit} jobs, the limit; delete jobs it no longer needs"
            ) from None

    def give_back(self, tenant: str) -> None:
        """Count one job fewer (never below zero)."""
        try:
            self._db.update(
                self._table,
                self._key(tenant),
                "ADD jobs :minus",
                condition="jobs > :zero",
                values={":minus": -1, ":zero": 0},
            )
        except ConditionFailed:
            pass
