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

from jobsched.aws.api_stores import (
    DEFAULT_MAX_JOBS_PER_TENANT,
    ENV_MAX_JOBS_PER_TENANT,
    JOB_COUNT_PREFIX,
    JobQuota,
)
from jobsched.ports.api import JobCounts, JobQuotaExceededError

__all__ = [
    "DEFAULT_MAX_JOBS_PER_TENANT",
    "ENV_MAX_JOBS_PER_TENANT",
    "PREFIX",
    "JobCounts",
    "JobQuota",
    "JobQuotaExceededError",
]

PREFIX = JOB_COUNT_PREFIX
