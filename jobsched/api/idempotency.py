"""``Idempotency-Key`` for ``POST /jobs``: the same key and body answer the first response again.

One record per (tenant, key) in the Leases table (``lease_key`` = ``api#<tenant>#<sha256(key)>``,
``expires_at`` = the table's TTL, 24 h; the store takes any table with a string key and a TTL).
The first request claims the key with a conditional put (``in_progress``, locked for
:data:`LOCK_SECONDS`), creates the job and stores the 201 response (``completed``).
A later request with that key:

- and the same body (compared by a fingerprint of the validated request) gets the stored response;
- and a different body gets 422 ``idempotency_key_reused``;
- while the first is still in progress gets 409. After the lock lapses (the first request died), a
  request with the same body may take the key over.

A request that fails releases its claim, so a rejected request leaves nothing behind.
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
LOCK_SECONDS = 60
_KEY_PATTERN = re.compile(r"^[\x21-\x7e]{1,128}$")


class IdempotencyKeyReusedError(ValidationError):
    """Raised when an ``Idempotency-Key`` is sent again with a different request body."""

    code = "idempotency_key_reused"


@dataclass(frozen=True)
class StoredResponse:
    status: int
    body: Any


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

    def begin(self, tenant: str, key: str, digest: str, now: datetime) -> StoredResponse | None:
        """Claim ``key`` for this request (``None``) or return the stored response to answer again."""
        record_id = self._id(tenant, key)
        epoch = int(now.timestamp())
        try:
            self._ddb.put_item(
                TableName=self._table,
                Item={
                    self._key: {"S": record_id},
                    "state": {"S": "in_progress"},
                    "fingerprint": {"S": digest},
                    "locked_until": {"N": str(epoch + LOCK_SECONDS)},
                    self._ttl: {"N": str(epoch + int(TTL.total_seconds()))},
                },
                ConditionExpression=(
                    "attribute_not_exists(#k) OR #ttl < :now OR "
                    "(#state = :progress AND locked_until < :now AND fingerprint = :fp)"
                ),
                ExpressionAttributeNames={"#k": self._key, "#ttl": self._ttl, "#state": "state"},
                ExpressionAttributeValues={
                    ":now": {"N": str(epoch)},
                    ":progress": {"S": "in_progress"},
                    ":fp": {"S": digest},
                },
            )
            return None
        except self._ddb.exceptions.ConditionalCheckFailedException:
            pass
        item = self._ddb.get_item(
            TableName=self._table, Key={self._key: {"S": record_id}}, ConsistentRead=True
        ).get("Item")
        if item is None:  # released between our put and get: the caller may simply retry
            raise ConflictError("Idempotency-Key: a request with this key just finished failing; retry")
        if item["fingerprint"]["S"] != digest:
            raise IdempotencyKeyReusedError(
                "Idempotency-Key: this key was used with a different request body; use a new key"
            )
        if item["state"]["S"] != "completed":
            raise ConflictError(
                "Idempotency-Key: a request with this key is still in progress; retry shortly"
            )
        return StoredResponse(status=int(item["status"]["N"]), body=json.loads(item["body"]["S"]))

    def complete(self, tenant: str, key: str, status: int, body: Any) -> None:
        self._ddb.update_item(
            TableName=self._table,
            Key={self._key: {"S": self._id(tenant, key)}},
            UpdateExpression="SET #state = :done, #status = :status, #body = :body",
            ExpressionAttributeNames={"#state": "state", "#status": "status", "#body": "body"},
            ExpressionAttributeValues={
                ":done": {"S": "completed"},
                ":status": {"N": str(status)},
                ":body": {"S": json.dumps(body, separators=(",", ":"))},
            },
        )

    def release(self, tenant: str, key: str) -> None:
        self._ddb.delete_item(TableName=self._table, Key={self._key: {"S": self._id(tenant, key)}})
