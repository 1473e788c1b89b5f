"""The SQS calls the run pipeline makes, in boto3's call shape (keyword arguments, dict answers).

The queue adapters (:mod:`jobsched.aws.queues`: batching, delays, message groups, metering) are written
on this port, so the same adapter code runs on SQS and on :class:`jobsched.testing.InMemoryQueues`;
the contract suite makes the same calls on both and compares the answers. What the guarantees rest on:

* ``DelaySeconds`` (0-900) hides a message until then; a received message is hidden for the
  visibility timeout (the queue's, or the receive's ``VisibilityTimeout``); ``change_message_visibility``
  (or ``change_message_visibility_batch``, ten at most, each entry answered) moves that instant (0:
  visible now); a receipt handle is valid until the message is received again;
* every receive counts (``ApproximateReceiveCount``); a queue with a redrive policy moves a message
  received ``maxReceiveCount`` times to its dead-letter queue instead of delivering it again;
* ``get_queue_attributes`` answers ``ApproximateNumberOfMessages`` (visible),
  ``ApproximateNumberOfMessagesDelayed`` and ``ApproximateNumberOfMessagesNotVisible``.
"""

from __future__ import annotations

from typing import Any, Protocol


class SqsApi(Protocol):
    """The subset of the SQS API jobsched calls."""

    def send_message(self, **kwargs: Any) -> dict[str, Any]: ...

    def send_message_batch(self, **kwargs: Any) -> dict[str, Any]: ...

    def receive_message(self, **kwargs: Any) -> dict[str, Any]: ...

    def delete_message(self, **kwargs: Any) -> dict[str, Any]: ...

    def change_message_visibility(self, **kwargs: Any) -> dict[str, Any]: ...

    def change_message_visibility_batch(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_queue_attributes(self, **kwargs: Any) -> dict[str, Any]: ...
