"""Every SQS call of the services: batched and single sends of run messages, visibility changes,
queue depth, and the container worker's receives and deletes (:class:`QueueConsumer`), all metered.

``SendMessageBatch`` takes at most 10 entries and 256 KiB in total; entries are grouped per queue and
split on both limits. ``MessageGroupId`` is the tenant (SQS fair queues: one noisy tenant cannot
starve the others), ``DelaySeconds`` holds the message until the run's due instant. Entries SQS
refuses are retried once; whatever still fails is reported so the caller does not advance the job
(the next tick re-sends: duplicates are harmless because the worker's claim is conditional).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobsched.aws.errors import AwsError, aws_call
from jobsched.aws.metering import Meter
from jobsched.core.messages import Outgoing, RunMessage, delay_seconds
from jobsched.core.pools import queue_for
from jobsched.core.queue_depth import FIGURES
from jobsched.ports.stores import SendReport

__all__ = [
    "Outgoing",
    "QueueConsumer",
    "QueueReadError",
    "Received",
    "RunQueues",
    "SendReport",
    "change_visibility",
    "queue_url_for_arn",
    "send_run_message",
    "set_visibility_batch",
]

logger = logging.getLogger(__name__)

MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024 - 4 * 1024  # keep a margin for attributes and group ids
#: SQS's cap on a message's visibility timeout (12 hours).
MAX_VISIBILITY_SECONDS = 43_200


class QueueReadError(Exception):
    """Raised when a queue's attributes could not be read (SQS refused, or answered without them)."""


def send_run_message(
    sqs: Any, queue_url: str, msg: RunMessage, now: datetime, meter: Meter | None = None
) -> None:
    """Send one run message (a retry, a replay, a sweeper re-send) with ``DelaySeconds`` rounded down as
    the dispatcher does (:func:`jobsched.core.messages.delay_seconds`: the worker waits out the
    sub-second rest, so the attempt starts at its due instant) and the tenant as the message group."""
    body = msg.to_json()
    delay = delay_seconds(msg.due_at, now)
    try:
        response = aws_call(
            sqs.send_message,
            QueueUrl=queue_url,
            MessageBody=body,
            DelaySeconds=delay,
            MessageGroupId=msg.tenant,
        )
        logger.info(
            "run message sent",
            extra={
                "queue": _queue_name(queue_url),
                "messages": {f"{msg.run_id}@{msg.attempt}": response.get("MessageId")},
                "delay_seconds": delay,
            },
        )
    finally:
        if meter is not None:
            meter.record_sqs("SendMessage", [len(body.encode())])


def change_visibility(sqs: Any, queue_url: str, receipt_handle: str, seconds: int) -> None:
    """Hide a received message for ``seconds`` more (0: visible now; capped at 12 h), not metered;
    :class:`~jobsched.aws.errors.AwsRefused` when SQS refused (the message may be gone)."""
    aws_call(
        sqs.change_message_visibility,
        QueueUrl=queue_url,
        ReceiptHandle=receipt_handle,
        VisibilityTimeout=max(0, min(int(seconds), MAX_VISIBILITY_SECONDS)),
    )


def set_visibility(sqs: Any, queue_url: str, receipt_handle: str, seconds: int, meter: Meter) -> bool:
    """:func:`change_visibility`, metered; False (logged) if SQS refused (the message may be gone)."""
    try:
        change_visibility(sqs, queue_url, receipt_handle, seconds)
        return True
    except AwsError:
        logger.warning("could not change the visibility of a message", exc_info=True)
        return False
    finally:
        meter.record_sqs("ChangeMessageVisibility", [])


def set_visibility_batch(
    sqs: Any, queue_url: str, receipt_handles: Sequence[str], seconds: int, meter: Meter
) -> set[str]:
    """Hide received messages of one queue for ``seconds`` more (0: visible now; capped at 12 h), ten
    per ``ChangeMessageVisibilityBatch`` (one request, metered as one, where :func:`set_visibility` makes
    one per message); the receipt handles SQS refused, logged: those messages may be gone already, or
    keep the visibility they had and come back when it ends."""
    visibility = max(0, min(int(seconds), MAX_VISIBILITY_SECONDS))
    handles = list(receipt_handles)
    refused: set[str] = set()
    for start in range(0, len(handles), MAX_BATCH_ENTRIES):
        chunk = handles[start : start + MAX_BATCH_ENTRIES]
        entries = [
            {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": visibility}
            for i, handle in enumerate(chunk)
        ]
        try:
            response = aws_call(sqs.change_message_visibility_batch, QueueUrl=queue_url, Entries=entries)
        except AwsError:
            logger.warning("could not change the visibility of %d messages", len(chunk), exc_info=True)
            refused.update(chunk)
            continue
        finally:
            meter.record_sqs("ChangeMessageVisibilityBatch", [])
        failed = response.get("Failed") or []
        if failed:
            logger.warning(
                "could not change the visibility of %d of %d messages",
                len(failed),
                len(chunk),
                extra={"failed": [{"code": f.get("Code"), "message": f.get("Message")} for f in failed]},
            )
        refused.update(chunk[int(f["Id"])] for f in failed)
    return refused


def queue_url_for_arn(queue_urls: Mapping[str, str], arn: str) -> str | None:
    """The URL of the queue an event source ARN names (``arn:aws:sqs:<region>:<account>:<name>``)."""
    name = arn.rsplit(":", 1)[-1]
    for url in dict(queue_urls).values():
        if url.rstrip("/").rsplit("/", 1)[-1] == name:
            return url
    return None


class RunQueues:
    """The run queues by kind (``high``, ``default``, ``low``, ``long``, ``container``), every call
    metered."""

    def __init__(self, sqs: Any, queue_urls: Mapping[str, str], meter: Meter | None = None):
        self.sqs = sqs
        self.queue_urls = dict(queue_urls)
        self.meter = meter or Meter()

    def send_one(self, msg: RunMessage, now: datetime) -> None:
        """Send ``msg`` to its run's queue, ``queue_for(pool, priority)`` (:func:`send_run_message`);
        SQS errors propagate."""
        send_run_message(self.sqs, self.queue_urls[queue_for(msg.pool, msg.priority)], msg, now, self.meter)

    def send_body(self, queue: str, body: str, tenant: str) -> None:
        """Send a message that is not a run's (a backfill's: :mod:`jobsched.services.backfills`) to the
        ``queue`` kind, the tenant as its group; SQS errors propagate."""
        try:
            aws_call(
                self.sqs.send_message,
                QueueUrl=self.queue_urls[queue],
                MessageBody=body,
                MessageGroupId=tenant,
            )
        finally:
            self.meter.record_sqs("SendMessage", [len(body.encode())])

    def set_visibility(self, queue_url: str, receipt_handle: str, seconds: int) -> bool:
        """Hide a received message for ``seconds`` more (0: visible now; capped at 12 h). False (logged)
        if SQS refused: the message may be gone already, and the run's lease is what fences."""
        return set_visibility(self.sqs, queue_url, receipt_handle, seconds, self.meter)

    def set_visibility_batch(self, queue_url: str, receipt_handles: Sequence[str], seconds: int) -> set[str]:
        """:meth:`set_visibility` of several received messages of one queue, ten per request
        (:func:`set_visibility_batch`); the receipt handles SQS refused (logged)."""
        return set_visibility_batch(self.sqs, queue_url, receipt_handles, seconds, self.meter)

    def visible_messages(self, queue: str) -> int:
        """The queue's ``ApproximateNumberOfMessages`` (ready, not delayed, not in flight); raises
        :class:`QueueReadError` if it cannot be read."""
        attribute = "ApproximateNumberOfMessages"
        try:
            response = aws_call(
                self.sqs.get_queue_attributes, QueueUrl=self.queue_urls[queue], AttributeNames=[attribute]
            )
            return int(response["Attributes"][attribute])
        except (AwsError, KeyError, ValueError) as exc:
            raise QueueReadError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self.meter.record_sqs("GetQueueAttributes", [])

    def depths(self, queue: str) -> dict[str, int]:
        """The queue's approximate counts, one ``GetQueueAttributes``: ``visible``, ``in_flight`` and
        ``delayed`` (:data:`jobsched.core.queue_depth.FIGURES`); raises :class:`QueueReadError` if they
        cannot be read."""
        try:
            response = aws_call(
                self.sqs.get_queue_attributes,
                QueueUrl=self.queue_urls[queue],
                AttributeNames=list(FIGURES.values()),
            )
            return {figure: int(response["Attributes"][name]) for figure, name in FIGURES.items()}
        except (AwsError, KeyError, ValueError) as exc:
            raise QueueReadError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self.meter.record_sqs("GetQueueAttributes", [])

    def send(self, outgoing: list[Outgoing]) -> SendReport:
        report = SendReport()
        by_queue: dict[str, list[Outgoing]] = defaultdict(list)
        for item in outgoing:
            by_queue[item.queue].append(item)
        for queue, items in by_queue.items():
            url = self.queue_urls[queue]
            for batch in _batches(items):
                failed = self._send_batch(url, batch)
                if failed:
                    failed = self._send_batch(url, [o for o in batch if o.key in failed])
                for item in batch:
                    if item.key in failed:
                        report.failed[item.key] = failed[item.key]
                    else:
                        report.sent.append(item.key)
        if report.failed:
            logger.warning("run messages not sent", extra={"failed": report.failed})
        return report

    def _send_batch(self, url: str, batch: list[Outgoing]) -> dict[str, str]:
        bodies = [o.message.to_json() for o in batch]
        entries = [
            {
                "Id": str(i),
                "MessageBody": body,
                "DelaySeconds": o.delay_seconds,
                "MessageGroupId": o.message.tenant,
            }
            for i, (o, body) in enumerate(zip(batch, bodies, strict=True))
        ]
        try:
            response = aws_call(self.sqs.send_message_batch, QueueUrl=url, Entries=entries)
        except AwsError as exc:
            self.meter.record_sqs("SendMessageBatch", [len(b.encode()) for b in bodies])
            return {o.key: str(exc) for o in batch}
        self.meter.record_sqs("SendMessageBatch", [len(b.encode()) for b in bodies])
        sent = {batch[int(ok["Id"])].key: ok.get("MessageId") for ok in response.get("Successful", [])}
        if sent:
            logger.info("run messages sent", extra={"queue": _queue_name(url), "messages": sent})
        return {
            batch[int(f["Id"])].key: f.get("Message", f.get("Code", "failed"))
            for f in response.get("Failed", [])
        }


@dataclass(frozen=True)
class Received:
    """One received message: what the worker needs of it (a Lambda SQS record's fields)."""

    message_id: str
    body: str
    receipt_handle: str
    receive_count: int | None  # ApproximateReceiveCount


class QueueConsumer:
    """One queue consumed by a long-running process (the container worker): long-poll receives, deletes
    and visibility changes, every call metered. What a Lambda event source mapping does for a function,
    done by the process itself."""

    def __init__(self, sqs: Any, queue_url: str, meter: Meter | None = None):
        self.sqs = sqs
        self.queue_url = queue_url
        self.meter = meter or Meter()

    def receive(self, max_messages: int, wait_seconds: int) -> list[Received]:
        """Up to ``max_messages`` (1-10) messages, long-polling up to ``wait_seconds`` (0-20) for the
        first; each stays hidden for the queue's visibility timeout. SQS errors propagate."""
        try:
            response = aws_call(
                self.sqs.receive_message,
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=max(1, min(int(max_messages), 10)),
                WaitTimeSeconds=max(0, min(int(wait_seconds), 20)),
                MessageSystemAttributeNames=["ApproximateReceiveCount"],
            )
        finally:
            self.meter.record_sqs("ReceiveMessage", [])
        return [_received(message) for message in response.get("Messages") or []]

    def delete(self, receipt_handle: str) -> bool:
        """Delete a handled message; False (logged) if SQS refused (the receipt expired: the message
        comes back, and the run's state makes its next delivery a no-op)."""
        try:
            aws_call(self.sqs.delete_message, QueueUrl=self.queue_url, ReceiptHandle=receipt_handle)
            return True
        except AwsError:
            logger.warning("could not delete a message", exc_info=True)
            return False
        finally:
            self.meter.record_sqs("DeleteMessage", [])

    def set_visibility(self, receipt_handle: str, seconds: int) -> bool:
        """Hide a received message for ``seconds`` more (0: visible now); False (logged) if refused."""
        return set_visibility(self.sqs, self.queue_url, receipt_handle, seconds, self.meter)


def _received(message: Mapping[str, Any]) -> Received:
    raw = (message.get("Attributes") or {}).get("ApproximateReceiveCount")
    try:
        count = int(raw) if raw is not None else None
    except (TypeError, ValueError):
        count = None
    return Received(
        message_id=str(message["MessageId"]),
        body=str(message.get("Body", "")),
        receipt_handle=str(message["ReceiptHandle"]),
        receive_count=count,
    )


def _queue_name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _batches(items: list[Outgoing]) -> list[list[Outgoing]]:
    batches: list[list[Outgoing]] = []
    current: list[Outgoing] = []
    size = 0
    for item in items:
        item_size = len(item.message.to_json().encode()) + len(item.message.tenant) + 64
        if current and (len(current) == MAX_BATCH_ENTRIES or size + item_size > MAX_BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(item)
        size += item_size
    if current:
        batches.append(current)
    return batches
