"""Queue pollers: what a Lambda SQS event source mapping does, for the embedded mode.

One poller per queue receives batches (short waits, so a stop is seen within about a second), turns
them into the exact SQS event Lambda delivers, invokes the handler on a thread pool sized by the
queue's reserved worker slots (so ``low`` can never take ``high``'s slots), and then deletes the
records the handler did not report in ``batchItemFailures``. Failed records are left alone: they
come back after the visibility timeout and, after ``maxReceiveCount`` receives, SQS redrives them
to the DLQ -- exactly as on AWS. A handler that raises, or reports an unknown item identifier,
fails the whole batch, as Lambda does.

Latency: moto's long poll does not wake up when a *delayed* message becomes visible (it waits out
the whole wait time and returns empty), so a run queued ahead with ``DelaySeconds`` could start up
to a wait time late. While a queue holds delayed messages (checked once a second) it is therefore
short-polled every ``idle_seconds``; otherwise it is long-polled (``wait_seconds``), which wakes
at once for a newly sent message.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

MAX_BATCH = 10  # SQS ReceiveMessage and DeleteMessageBatch limit


def to_lambda_record(message: dict[str, Any], *, queue_arn: str, region: str) -> dict[str, Any]:
    """One ReceiveMessage message as a Lambda SQS event record."""
    attributes = {k: str(v) for k, v in (message.get("Attributes") or {}).items()}
    message_attributes = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        message_attributes[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": value.get("BinaryValue"),
            "stringListValues": value.get("StringListValues", []),
            "binaryListValues": value.get("BinaryListValues", []),
            "dataType": value.get("DataType"),
        }
    body = message.get("Body", "")
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody") or hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def failed_ids(response: Any, message_ids: set[str]) -> set[str] | None:
    """The message ids a handler reported failed; None when the whole batch counts as failed.

    Lambda treats a ``batchItemFailures`` entry with an empty or unknown ``itemIdentifier`` as a
    failure of the whole batch; a response without the key means every record succeeded.
    """
    if not isinstance(response, dict) or "batchItemFailures" not in response:
        return set()
    failures = response["batchItemFailures"] or []
    ids: set[str] = set()
    for failure in failures:
        item = failure.get("itemIdentifier") if isinstance(failure, dict) else None
        if not item or item not in message_ids:
            return None
        ids.add(item)
    return ids


class QueuePoller:
    """Feeds one queue to one handler with at most ``slots`` concurrent invocations."""

    def __init__(
        self,
        *,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        invoke: Callable[[dict[str, Any]], Any],
        slots: int,
        stop: threading.Event,
        region: str = "us-east-1",
        batch_size: int = MAX_BATCH,
        wait_seconds: int = 1,
        idle_seconds: float = 0.2,
        name: str = "",
    ):
        if slots < 1:
            raise ValueError("a queue poller needs at least one worker slot")
        self.sqs = sqs
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.invoke = invoke
        self.slots = slots
        self.stop_event = stop
        self.region = region
        self.batch_size = max(1, min(batch_size, MAX_BATCH))
        self.wait_seconds = wait_seconds
        self.idle_seconds = idle_seconds
        self._fast = False
        self._delayed = False
        self._delayed_checked_at = -1.0
        self.name = name or queue_arn.rsplit(":", 1)[-1]
        self._free = threading.Semaphore(slots)
        self._thread: threading.Thread | None = None
        self._busy: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"poller-{self.name}", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> int:
        """How many batches are being handled right now."""
        with self._lock:
            return len(self._busy)

    def join(self, timeout: float) -> None:
        """After ``stop`` is set: wait up to ``timeout`` s for the receive loop and the running batches.

        Batch threads are daemons: a handler still running at the deadline is abandoned (its messages
        come back after their visibility timeout, as after a Lambda crash) so shutdown stays prompt.
        """
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            running = list(self._busy)
        for thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            # A slot is taken before receiving, so no message waits out its visibility in our hands.
            if not self._free.acquire(timeout=0.5):
                continue
            try:
                messages = self._receive()
            except Exception:
                self._free.release()
                if not self.stop_event.is_set():
                    log.exception("receive from %s failed", self.name)
                    self.stop_event.wait(1.0)
                continue
            if not messages or self.stop_event.is_set():
                self._free.release()
                if not messages and self._fast:
                    self.stop_event.wait(self.idle_seconds)
                continue
            thread = threading.Thread(
                target=self._run_batch, args=(messages,), name=f"worker-{self.name}", daemon=True
            )
            with self._lock:
                self._busy.add(thread)
            thread.start()

    def _has_delayed(self) -> bool:
        """Whether the queue holds delayed messages (asked at most once a second)."""
        now = time.monotonic()
        if now - self._delayed_checked_at >= 1.0:
            attributes = self.sqs.get_queue_attributes(
                QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
            )["Attributes"]
            self._delayed = int(attributes.get("ApproximateNumberOfMessagesDelayed", 0)) > 0
            self._delayed_checked_at = now
        return self._delayed

    def _receive(self) -> list[dict[str, Any]]:
        self._fast = self.wait_seconds == 0 or self._has_delayed()
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            WaitTimeSeconds=0 if self._fast else self.wait_seconds,
            AttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def _run_batch(self, messages: list[dict[str, Any]]) -> None:
        try:
            self.process(messages)
        except Exception:
            if not self.stop_event.is_set():  # after a stop, moto is gone: the error says nothing new
                log.exception("batch on %s failed", self.name)
        finally:
            with self._lock:
                self._busy.discard(threading.current_thread())
            self._free.release()

    def process(self, messages: list[dict[str, Any]]) -> set[str]:
        """Invoke the handler with ``messages`` and delete the successes; returns the ids deleted."""
        records = [to_lambda_record(m, queue_arn=self.queue_arn, region=self.region) for m in messages]
        ids = {r["messageId"] for r in records}
        try:
            response = self.invoke({"Records": records})
        except Exception:
            log.exception("handler for %s raised; the batch of %d is left to visibility", self.name, len(ids))
            return set()
        failed = failed_ids(response, ids)
        if failed is None:
            log.warning("handler for %s reported an unknown itemIdentifier; whole batch failed", self.name)
            return set()
        done = [r for r in records if r["messageId"] not in failed]
        for start in range(0, len(done), MAX_BATCH):
            chunk = done[start : start + MAX_BATCH]
            result = self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(chunk)],
            )
            for failure in result.get("Failed", []):
                log.warning("delete on %s failed: %s", self.name, failure)
        return {r["messageId"] for r in done}
