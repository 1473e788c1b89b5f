"""Large run outputs in S3, small ones inline.

A run item is billed per 1 KB written, so an output over :data:`INLINE_OUTPUT_LIMIT` bytes (compact
JSON) goes to S3 and the run keeps only the key (``output_ref``); so do the outputs of a chunked job's
chunks (:meth:`OutputStore.put_payload`). Job payloads never come here: they are at most 64 KiB and
travel inline in the SQS message (:mod:`jobsched.core.messages`). The bucket's lifecycle rule expires
objects ``retention_days`` after they were written; reading an object that is gone raises
:class:`ObjectExpired`, which the API turns into ``output_expired``.
"""

from __future__ import annotations

import json
from typing import Any

from jobsched.aws.errors import AwsRefused, aws_call
from jobsched.core.errors import PermanentError, RetryableError
from jobsched.core.models import parse_run_id

#: Outputs up to 4 KiB stay on the run item. The completion write is the run item's last write, so an
#: inline output costs its size once, 1 WRU per KB ($0.625 per million KB); an S3 PUT costs $5 per
#: million plus a GET to read it back, so inlining is cheaper up to about 8 KB. 4 KiB keeps items small
#: for the run listings (which read whole items) while staying on the cheap side.
INLINE_OUTPUT_LIMIT = 4096


#: S3 error codes of a GetObject whose key does not exist (any more).
_GONE = ("NoSuchKey", "404", "NotFound")


class ObjectExpired(PermanentError):
    """Raised by :meth:`OutputStore.get_json` when the object is not in the bucket: the lifecycle rule
    expired it (or it was deleted). Permanent: no retry brings it back. The API answers a run whose
    output is gone with ``output_expired: true`` (never an error)."""

    code = "object_expired"


def encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode()


class OutputStore:
    """Reads and writes run outputs and payloads in one bucket (client injected)."""

    def __init__(self, s3_client: Any, bucket: str | None, inline_limit: int = INLINE_OUTPUT_LIMIT):
        self._s3 = s3_client
        self._bucket = bucket
        self.inline_limit = inline_limit

    def place_output(self, tenant: str, run_id: str, attempt: int, output: Any) -> tuple[Any, str | None]:
        """Return ``(inline_output, None)`` for a small output or ``(None, s3_key)`` after storing a
        large one. Without a bucket a large output is an error (the deployment always has one)."""
        body = encode(output)
        if len(body) <= self.inline_limit:
            return json.loads(body), None
        job_id, run_key = parse_run_id(run_id)
        key = f"outputs/{tenant}/{job_id}/{run_key}/attempt-{attempt}.json"
        self._put(key, body)
        return None, key

    def put_payload(self, tenant: str, run_id: str, payload: Any, label: str) -> str:
        """Store a JSON value under the run's ``payloads/`` prefix (a chunk's output); return its key."""
        job_id, run_key = parse_run_id(run_id)
        key = f"payloads/{tenant}/{job_id}/{run_key}/{label}.json"
        self._put(key, encode(payload))
        return key

    def get_json(self, key: str) -> Any:
        """Read an output or payload stored by key; :class:`ObjectExpired` when it is gone."""
        if not self._bucket:
            raise RetryableError(f"no bucket configured to read {key}")
        try:
            body = aws_call(self._s3.get_object, Bucket=self._bucket, Key=key)["Body"].read()
        except AwsRefused as exc:
            if exc.code in _GONE:
                raise ObjectExpired(f"{key} is no longer in the bucket (expired)") from None
            raise
        return json.loads(body)

    def _put(self, key: str, body: bytes) -> None:
        if not self._bucket:
            raise RetryableError(f"no bucket configured for {key} ({len(body)} bytes)")
        aws_call(self._s3.put_object, Bucket=self._bucket, Key=key, Body=body, ContentType="application/json")
