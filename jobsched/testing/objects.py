"""An in-memory :class:`jobsched.ports.objects.ObjectApi`: buckets of bytes by key.

``get_object`` of a missing key fails with ``NoSuchKey`` (as an S3 object past the bucket's lifecycle
does), raised as :class:`jobsched.aws.errors.AwsRefused`; :meth:`InMemoryObjects.expire` removes an
object to test that path (``delete_object`` does too, as S3's does, for tests written against a client).
"""

from __future__ import annotations

import io
import threading
from typing import Any

from jobsched.aws.errors import refused

__all__ = ["InMemoryObjects"]


class InMemoryObjects:
    """Buckets in memory; a bucket exists once :meth:`create_bucket` named it."""

    def __init__(self, *buckets: str):
        self._buckets: dict[str, dict[str, tuple[bytes, str | None]]] = {b: {} for b in buckets}
        self._lock = threading.Lock()

    def create_bucket(self, Bucket: str, **_: Any) -> dict[str, Any]:
        with self._lock:
            self._buckets.setdefault(Bucket, {})
        return {"Location": f"/{Bucket}"}

    def _bucket(self, name: str, operation: str) -> dict[str, tuple[bytes, str | None]]:
        if name not in self._buckets:
            raise refused("NoSuchBucket", "The specified bucket does not exist", operation)
        return self._buckets[name]

    def put_object(
        self, Bucket: str, Key: str, Body: bytes | str, ContentType: str | None = None, **_: Any
    ) -> dict[str, Any]:
        data = Body.encode() if isinstance(Body, str) else bytes(Body)
        with self._lock:
            self._bucket(Bucket, "PutObject")[Key] = (data, ContentType)
        return {}

    def get_object(self, Bucket: str, Key: str, **_: Any) -> dict[str, Any]:
        with self._lock:
            found = self._bucket(Bucket, "GetObject").get(Key)
        if found is None:
            raise refused("NoSuchKey", "The specified key does not exist.", "GetObject")
        data, content_type = found
        answer: dict[str, Any] = {"Body": io.BytesIO(data), "ContentLength": len(data)}
        if content_type:
            answer["ContentType"] = content_type
        return answer

    def delete_object(self, Bucket: str, Key: str, **_: Any) -> dict[str, Any]:
        """As S3: deleting a key that is not there succeeds too."""
        with self._lock:
            self._bucket(Bucket, "DeleteObject").pop(Key, None)
        return {}

    # --- for tests ---------------------------------------------------------------------------------

    def keys(self, bucket: str) -> list[str]:
        """The keys in ``bucket``, sorted."""
        with self._lock:
            return sorted(self._bucket(bucket, "ListObjectsV2"))

    def expire(self, bucket: str, key: str) -> None:
        """Remove an object, as the bucket's lifecycle rule does once it is old enough."""
        with self._lock:
            self._bucket(bucket, "DeleteObject").pop(key, None)
