"""Jobs per tenant: a counter per tenant, checked and bumped before a job is created.

The counter is an item in the Leases table (``lease_key = "jobcount#<tenant>"``, attribute ``jobs``,
no TTL). Creating a job first adds one with a conditional update (``jobs < limit``), so two racing
creates cannot both take the last slot; a create that is then refused gives its slot back, and
deleting a job gives one back. The counter is not in the same transaction as the job item, so it errs
high, never low: a function that dies between the two, or a create that fails without knowing whether
its job was written (a timeout), leaves it one too high; it never lets a tenant exceed the limit.

A create retried with its ``Idempotency-Key`` counts its job once: if the first attempt wrote the job
(and took the slot), the retry answers with that job without taking one; if a retry finds the job
only when its own write is refused as a duplicate, it gives its slot back.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.errors import ConflictError

ENV_MAX_JOBS_PER_TENANT = "JOBSCHED_MAX_JOBS_PER_TENANT"
DEFAULT_MAX_JOBS_PER_TENANT = 10_000
PREFIX = "jobcount#"


class JobQuotaExceededError(ConflictError):
    """Raised when a tenant already has as many jobs as its limit allows."""

    code = "job_limit_reached"


class JobQuota:
    """The per-tenant job counter (client injected, Leases table name given)."""

    def __init__(self, dynamodb: Any, table: str, limit: int = DEFAULT_MAX_JOBS_PER_TENANT):
        if limit < 1:
            raise ValueError(f"{ENV_MAX_JOBS_PER_TENANT} must be >= 1, got {limit}")
        self._ddb = dynamodb
        self._table = table
        self.limit = limit

    def _key(self, tenant: str) -> dict[str, Any]:
        return {"lease_key": {"S": PREFIX + tenant}}

    def take(self, tenant: str) -> None:
        """Count one more job for ``tenant``; :class:`JobQuotaExceededError` at the limit."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._key(tenant),
                UpdateExpression="ADD jobs :one",
                ConditionExpression="attribute_not_exists(jobs) OR jobs < :limit",
                ExpressionAttributeValues={":one": {"N": "1"}, ":limit": {"N": str(self.limit)}},
            )
        except self._ddb.exceptions.ConditionalCheckFailedException:
            raise JobQuotaExceededError(
                f"this tenant has {self.limit} jobs, the limit; delete jobs it no longer needs"
            ) from None

    def give_back(self, tenant: str) -> None:
        """Count one job fewer (never below zero)."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._key(tenant),
                UpdateExpression="ADD jobs :minus",
                ConditionExpression="jobs > :zero",
                ExpressionAttributeValues={":minus": {"N": "-1"}, ":zero": {"N": "0"}},
            )
        except self._ddb.exceptions.ConditionalCheckFailedException:
            pass
