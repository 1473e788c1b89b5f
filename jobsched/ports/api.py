"""The API's own records: ``Idempotency-Key`` claims, principal -> tenant mappings, job counts.

The values and errors the stores answer with live here, beside the Protocols, so the API, the
DynamoDB stores (:mod:`jobsched.aws.api_stores`) and the fakes share them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from jobsched.core.errors import ConflictError, ValidationError


class IdempotencyKeyReusedError(ValidationError):
    """Raised when an ``Idempotency-Key`` is sent again with a different request body."""

    code = "idempotency_key_reused"


class IdempotentJobDeletedError(ConflictError):
    """Raised when a create is retried with its ``Idempotency-Key`` after the job its first attempt
    created was deleted, and that attempt's response had not been stored: creating the job again would
    bring a deleted job back."""

    code = "idempotency_job_deleted"


class JobQuotaExceededError(ConflictError):
    """Raised when a tenant already has as many jobs as its limit allows."""

    code = "job_limit_reached"


@dataclass(frozen=True)
class StoredResponse:
    status: int
    body: Any


@dataclass(frozen=True)
class Claim:
    """This request holds the key: it creates the job under ``job_id``. ``resumed``: an earlier request
    with the key claimed it first and did not finish, so the job may already be stored."""

    job_id: str
    resumed: bool


class IdempotencyRecords(Protocol):
    """Claims of ``Idempotency-Key`` s and the responses stored for them (see
    :mod:`jobsched.api.idempotency` for the protocol a create follows)."""

    def begin(
        self, tenant: str, key: str, digest: str, now: datetime, *, job_id: str
    ) -> Claim | StoredResponse: ...

    def complete(self, tenant: str, key: str, status: int, body: Any) -> None: ...

    def release(self, tenant: str, key: str) -> None: ...

    def unlock(self, tenant: str, key: str) -> None: ...

    def record_deletion(self, tenant: str, job_id: str, now: datetime) -> None: ...

    def was_deleted(self, tenant: str, job_id: str, now: datetime) -> bool: ...


class Principals(Protocol):
    """IAM principal -> tenant mappings."""

    def put(self, principal: str, tenant: str, *, now: datetime) -> dict[str, str]: ...

    def delete(self, principal: str) -> None: ...

    def resolve(self, candidates: Sequence[str]) -> str | None: ...

    def list(self) -> list[dict[str, str]]: ...


class JobCounts(Protocol):
    """The per-tenant job counter that caps how many jobs a tenant has."""

    limit: int

    def take(self, tenant: str) -> None: ...

    def give_back(self, tenant: str) -> None: ...
