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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobsched.api.errors import BadRequestError
from jobsched.core.errors import ConflictError, ValidationError

TTL = timedelta(hours=24)
#: Longer than the api function may run (29 s), so a claim is never taken from a request still running.
LOCK_SECONDS = 60
_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,128}$")


class IdempotencyKeyReusedError(ValidationError):
    """Raised when an ``Idempotency-Key`` is sent again with a different request body."""

    code = "idempotency_key_reused"


class IdempotentJobDeletedError(ConflictError):
    """Raised when a create is retried with its ``Idempotency-Key`` after the job its first attempt
    created was deleted, and that attempt's response had not been stored: creating the job again would
    bring a deleted job back."""

    code = "idempotency_job_deleted"


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


def fingerprint(request: Any) -> str:
    """A stable digest of a JSON-able request (key order and whitespace do not matter)."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def check_key(key: str) -> str:
    if not _KEY_PATTERN.match(key):
        raise BadRequestError("Idempotency-Key: use 1-128 printable ASCII characters without spaces")
    return key


class IdempotencyStore:
    """The records, in a table with a string partition key and an epoch-seconds TTL attribute."""

    def __init__(
        self, dynamodb: Any, table: str, *, key_attribute: str = "id", ttl_attribute: str = "expiration"
    ):
        self._ddb = dynamodb
        self._table = table
        self._key = key_attribute
        self._ttl = ttl_attribute

    def _id(self, tenant: str, key: str) -> str:
        return f"api#{tenant}#{hashlib.sha256(key.encode()).hexdigest()}"

    def _record_key(self, tenant: str, key: str) -> dict[str, Any]:
        return {self._key: {"S": self._id(tenant, key)}}

    def begin(
        self, tenant: str, key: str, digest: str, now: datetime, *, job_id: str
    ) -> Claim | StoredResponse:
        """Claim ``key`` for this request, or return the stored response to answer again.

        ``job_id`` is the id a new claim fixes for the job; a claim taken over keeps the id it holds.
        """
        epoch = int(now.timestamp())
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item={
                    **self._record_key(tenant, key),
                    "state": {"S": "in_progress"},
                    "fingerprint": {"S": digest},
                    "job_id": {"S": job_id},
                    "locked_until": {"N": str(epoch + LOCK_SECONDS)},
                    self._ttl: {"N": str(epoch + int(TTL.total_seconds()))},
                },
                ConditionExpression="attribute_not_exists(#k) OR #ttl < :now",
                ExpressionAttributeNames={"#k": self._key, "#ttl": self._ttl},
                ExpressionAttributeValues={":now": {"N": str(epoch)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return Claim(job_id=job_id, resumed=False)
        except self._ddb.exceptions.ConditionalCheckFailedException as failed:
            item = failed.response.get("Item")
        if item is None:  # DynamoDB returns the stored record with the failure; read it if it did not
            item = self._ddb.get_item(
                TableName=self._table, Key=self._record_key(tenant, key), ConsistentRead=True
            ).get("Item")
        if item is None:  # released meanwhile: the caller may simply retry
            raise ConflictError("Idempotency-Key: a request with this key just finished failing; retry")
        if item["fingerprint"]["S"] != digest:
            raise IdempotencyKeyReusedError(
                "Idempotency-Key: this key was used with a different request body; use a new key"
            )
        if item["state"]["S"] == "completed":
            return StoredResponse(status=int(item["status"]["N"]), body=json.loads(item["body"]["S"]))
        if int(item["locked_until"]["N"]) >= epoch:
            raise ConflictError(
                "Idempotency-Key: a request with this key is still in progress; retry shortly"
            )
        return self._take_over(tenant, key, item, epoch, job_id)

    def _take_over(self, tenant: str, key: str, item: dict[str, Any], epoch: int, job_id: str) -> Claim:
        """Lock a lapsed claim for this request; of two retries racing for it, one wins, one gets 409."""
        kept = item.get("job_id", {}).get("S", job_id)  # a record from before claims held a job id
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._record_key(tenant, key),
                UpdateExpression="SET locked_until = :lock, job_id = :job",
                ConditionExpression="#state = :progress AND locked_until = :seen AND fingerprint = :fp",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={
                    ":lock": {"N": str(epoch + LOCK_SECONDS)},
                    ":job": {"S": kept},
                    ":progress": {"S": "in_progress"},
                    ":seen": item["locked_until"],
                    ":fp": item["fingerprint"],
                },
            )
        except self._ddb.exceptions.ConditionalCheckFailedException:
            raise ConflictError(
                "Idempotency-Key: a request with this key is still in progress; retry shortly"
            ) from None
        return Claim(job_id=kept, resumed=True)

    def complete(self, tenant: str, key: str, status: int, body: Any) -> None:
        """Store the final response for the key (a record gone meanwhile, its 24 h over, stays gone)."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._record_key(tenant, key),
                UpdateExpression="SET #state = :done, #status = :status, #body = :body",
                ConditionExpression="attribute_exists(fingerprint)",
                ExpressionAttributeNames={"#state": "state", "#status": "status", "#body": "body"},
                ExpressionAttributeValues={
                    ":done": {"S": "completed"},
                    ":status": {"N": str(status)},
                    ":body": {"S": json.dumps(body, separators=(",", ":"))},
                },
            )
        except self._ddb.exceptions.ConditionalCheckFailedException:
            pass

    def release(self, tenant: str, key: str) -> None:
        """Forget the claim of a request that was refused before it wrote anything."""
        self._ddb.delete_item(TableName=self._table, Key=self._record_key(tenant, key))

    def unlock(self, tenant: str, key: str) -> None:
        """Lift the lock of a request that failed without knowing whether its job was written: a retry
        takes the claim over at once and finds the job, or creates it, under the same id."""
        try:
            self._ddb.update_item(
                TableName=self._table,
                Key=self._record_key(tenant, key),
                UpdateExpression="SET locked_until = :open",
                ConditionExpression="#state = :progress",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues={":open": {"N": "0"}, ":progress": {"S": "in_progress"}},
            )
        except self._ddb.exceptions.ConditionalCheckFailedException:
            pass

    # --- tombstones of deleted jobs -------------------------------------------------------------

    def _tombstone_key(self, tenant: str, job_id: str) -> dict[str, Any]:
        return {self._key: {"S": f"apidel#{tenant}#{job_id}"}}

    def record_deletion(self, tenant: str, job_id: str, now: datetime) -> None:
        """Remember for :data:`TTL` that the job is (being) deleted, so that a create retried under a
        claim that still holds this job id does not create it again (written before the delete)."""
        self._ddb.put_item(
            TableName=self._table,
            Item={
                **self._tombstone_key(tenant, job_id),
                self._ttl: {"N": str(int(now.timestamp()) + int(TTL.total_seconds()))},
            },
        )

    def was_deleted(self, tenant: str, job_id: str, now: datetime) -> bool:
        item = self._ddb.get_item(
            TableName=self._table, Key=self._tombstone_key(tenant, job_id), ConsistentRead=True
        ).get("Item")
        return item is not None and int(item[self._ttl]["N"]) >= int(now.timestamp())
