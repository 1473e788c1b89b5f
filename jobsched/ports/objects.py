"""The bucket calls of :class:`jobsched.aws.outputs.OutputStore`, in boto3's call shape.

``put_object`` stores bytes under a key; ``get_object`` answers ``{"Body": <readable>}`` or fails with
the code ``NoSuchKey`` (an output past the bucket's lifecycle), which the store reports as
:class:`jobsched.aws.outputs.ObjectExpired`.
"""

from __future__ import annotations

from typing import Any, Protocol


class ObjectApi(Protocol):
    """The subset of the S3 API jobsched calls."""

    def put_object(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_object(self, **kwargs: Any) -> dict[str, Any]: ...
