"""``Idempotency-Key`` for ``POST /jobs``: a retried create answers with its job, never a second one.

One record per (tenant, key) in the Leases table (``lease_key`` = ``api#<tenant>#<sha256(key)>``,
``expires_at`` = the table's TTL, 24 h after the key's first use; the store takes any table with a
string key and a TTL). The first request claims the key with a conditional put: ``in_progress``,
locked for :data:`LOCK_SECONDS`, holding the **job id** the create will use. It creates the job under
that id and stores the 201 response (``completed``). A later request with that key:

- and the same body (compared by a fingerprint of the validated request) gets the stored response;
- and a different body gets 422 ``idempotency_key_reused``;
- while the first is still in progress gets 409. Once the lock lapses (the first request died, or
  failed without knowing whether its job was written and lifted its lock), a request with the same
  body takes the claim over, job id included (:attr:`Claim.resumed`).

The job's put is conditional on its id, so a request that takes a claim over cannot create a second
job: if the first attempt wrote the job before it died, the retry finds that job and answers with it.
The id is fixed per claim rather than derived from (tenant, key): a key may be used again once its
24 h are over, and must then create a new job — not find the old one, nor reuse the id of a deleted
job, whose run history (run ids derive from the job id) stays — and the API's ids sort newest first.

A job deleted before its create's response was stored must not come back when that create is retried:
deleting a job first leaves a tombstone (``apidel#<tenant>#<job id>``, 24 h TTL: one write per delete,
read only by a resumed claim that finds no job), and a resumed claim whose job is gone and tombstoned
is answered 409 ``idempotency_job_deleted``, an answer then stored for the key. A job deleted after
its 201 was stored is not looked up: a retry gets the stored 201 again.

A request that is refused (validation, limit) releases its claim, so it leaves nothing behind; one
that fails otherwise (its job may be written) keeps the claim and lifts the lock, for a retry to
take over at once.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from jobsched.api.errors import BadRequestError
from jobsched.aws.api_stores import LOCK_SECONDS, TTL, IdempotencyStore
from jobsched.ports.api import (
    Claim,
    IdempotencyKeyReusedError,
    IdempotencyRecords,
    IdempotentJobDeletedError,
    StoredResponse,
)

__all__ = [
    "LOCK_SECONDS",
    "TTL",
    "Claim",
    "IdempotencyKeyReusedError",
    "IdempotencyRecords",
    "IdempotencyStore",
    "IdempotentJobDeletedError",
    "StoredResponse",
    "check_key",
    "fingerprint",
]

_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,128}$")


def fingerprint(request: Any) -> str:
    """A stable digest of a JSON-able request (key order and whitespace do not matter)."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def check_key(key: str) -> str:
    if not _KEY_PATTERN.match(key):
        raise BadRequestError("Idempotency-Key: use 1-128 printable ASCII characters without spaces")
    return key
