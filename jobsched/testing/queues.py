"""An in-memory :class:`jobsched.ports.queues.SqsApi`: standard SQS queues run by a clock.

Every instant comes from ``clock`` (a :class:`jobsched.core.clock.FakeClock` in tests), so a test moves
time instead of sleeping: ``DelaySeconds`` hides a message until the clock passes it; a received
message is hidden for the visibility timeout and comes back when the clock passes that;
``change_message_visibility`` (and its batch) moves the instant (0: visible now); every receive counts
(``ApproximateReceiveCount``) and hands out a new receipt handle; a queue with a redrive policy moves a
message that was received ``maxReceiveCount`` times to its dead-letter queue on the next receive, as
SQS does. Messages are delivered oldest first (SQS standard queues only try to).

Errors are SQS's codes, raised as :class:`jobsched.aws.errors.AwsRefused` (a ``ClientError``):
``AWS.SimpleQueueService.NonExistentQueue``, ``ReceiptHandleIsInvalid``, ``InvalidParameterValue``
(a delay over 900 s, a visibility over 12 h), ``TooManyEntriesInBatchRequest``,
``BatchEntryIdsNotDistinct``, ``BatchRequestTooLong``, ``EmptyBatchRequest``.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from jobsched.aws.errors import AwsRefused, refused
from jobsched.core.clock import Clock

__all__ = ["InMemoryQueues"]

ACCOUNT = "123456789012"
REGION = "us-east-1"
MAX_BYTES = 256 * 1024
MAX_DELAY_SECONDS = 900
MAX_VISIBILITY_SECONDS = 43_200
DEFAULT_VISIBILITY_SECONDS = 30


@dataclass
class _Message:
    id: str
    body: str
    sent_ms: int
    visible_ms: int  # delay first, then each receive's visibility
    group: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    receives: int = 0
    first_receive_ms: int | None = None
    receipts: set[str] = field(default_factory=set)
    receipt: str | None = None  # the latest handle
    delay_seconds: int = 0  # as sent


@dataclass
class _Queue:
    name: str
    url: str
    arn: str
    visibility_seconds: int = DEFAULT_VISIBILITY_SECONDS
    delay_seconds: int = 0
    redrive: dict[str, Any] | None = None  # {"deadLetterTargetArn", "maxReceiveCount"}
    messages: list[_Message] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)  # receipt handles of deleted messages


class InMemoryQueues:
    """The SQS queues of one account in memory; create them with :meth:`create_queue` (as the tests'
    ``provision`` does on moto) or all of a deployment's with :meth:`for_settings`."""

    def __init__(self, clock: Clock):
        self.clock = clock
        self._queues: dict[str, _Queue] = {}  # by URL
        self._lock = threading.RLock()

    @classmethod
    def for_settings(cls, settings: Any, *, clock: Clock) -> InMemoryQueues:
        """Every queue and dead-letter queue ``settings`` names, each with its redrive policy
        (``maxReceiveCount`` from :data:`jobsched.runtime.resources.QUEUES`)."""
        from jobsched.runtime.resources import QUEUES

        queues = cls(clock)
        receive_counts = {spec.kind: spec.max_receive_count for spec in QUEUES}
        for kind, url in dict(settings.queue_urls).items():
            dlq_url = dict(settings.dlq_urls).get(kind)
            attributes: dict[str, str] = {}
            if dlq_url:
                dlq = queues._add(dlq_url, {})
                redrive = {
                    "deadLetterTargetArn": dlq.arn,
                    "maxReceiveCount": str(receive_counts.get(kind, 5)),
                }
                attributes["RedrivePolicy"] = json.dumps(redrive)
            queues._add(url, attributes)
        return queues

    # --- helpers -----------------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(Decimal(str(self.clock.now().timestamp())) * 1000)

    def _add(self, url: str, attributes: Mapping[str, str]) -> _Queue:
        name = url.rstrip("/").rsplit("/", 1)[-1]
        queue = self._queues.get(url) or _Queue(
            name=name, url=url, arn=f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
        )
        if "VisibilityTimeout" in attributes:
            queue.visibility_seconds = int(attributes["VisibilityTimeout"])
        if "DelaySeconds" in attributes:
            queue.delay_seconds = int(attributes["DelaySeconds"])
        if "RedrivePolicy" in attributes:
            policy = json.loads(attributes["RedrivePolicy"])
            queue.redrive = {
                "deadLetterTargetArn": policy["deadLetterTargetArn"],
                "maxReceiveCount": int(policy["maxReceiveCount"]),
            }
        self._queues[url] = queue
        return queue

    def _queue(self, url: str, operation: str) -> _Queue:
        queue = self._queues.get(url)
        if queue is None:
            raise refused(
                "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.", operation
            )
        return queue

    def _by_arn(self, arn: str) -> _Queue | None:
        return next((q for q in self._queues.values() if q.arn == arn), None)

    def _enqueue(
        self, queue: _Queue, body: str, delay: int | None, group: str | None, attrs: Any
    ) -> _Message:
        delay = queue.delay_seconds if delay is None else int(delay)
        if not 0 <= delay <= MAX_DELAY_SECONDS:
            raise refused(
                "InvalidParameterValue",
                f"Value {delay} for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.",
                "SendMessage",
            )
        if len(body.encode()) > MAX_BYTES:
            raise refused(
                "InvalidParameterValue", "One or more parameters are invalid: message too long", "SendMessage"
            )
        now = self._now_ms()
        message = _Message(
            id=str(uuid.uuid4()),
            body=body,
            sent_ms=now,
            visible_ms=now + delay * 1000,
            group=group,
            attributes=dict(attrs or {}),
            delay_seconds=delay,
        )
        queue.messages.append(message)
        return message

    # --- the SqsApi port ---------------------------------------------------------------------------

    def create_queue(self, QueueName: str, Attributes: Mapping[str, str] | None = None) -> dict[str, Any]:
        with self._lock:
            url = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{QueueName}"
            self._add(url, Attributes or {})
            return {"QueueUrl": url}

    def send_message(
        self,
        QueueUrl: str,
        MessageBody: str,
        DelaySeconds: int | None = None,
        MessageGroupId: str | None = None,
        MessageAttributes: Mapping[str, Any] | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        with self._lock:
            queue = self._queue(QueueUrl, "SendMessage")
            message = self._enqueue(queue, MessageBody, DelaySeconds, MessageGroupId, MessageAttributes)
            return {"MessageId": message.id, "MD5OfMessageBody": _md5(MessageBody)}

    def send_message_batch(self, QueueUrl: str, Entries: list[Mapping[str, Any]]) -> dict[str, Any]:
        with self._lock:
            queue = self._queue(QueueUrl, "SendMessageBatch")
            _check_batch(Entries, "SendMessageBatch")
            if sum(len(str(e["MessageBody"]).encode()) for e in Entries) > MAX_BYTES:
                raise refused(
                    "BatchRequestTooLong",
                    "Batch requests cannot be longer than 262144 bytes.",
                    "SendMessageBatch",
                )
            successful = []
            for entry in Entries:
                message = self._enqueue(
                    queue,
                    str(entry["MessageBody"]),
                    entry.get("DelaySeconds"),
                    entry.get("MessageGroupId"),
                    entry.get("MessageAttributes"),
                )
                successful.append(
                    {"Id": entry["Id"], "MessageId": message.id, "MD5OfMessageBody": _md5(message.body)}
                )
            return {"Successful": successful, "Failed": []}

    def receive_message(
        self,
        QueueUrl: str,
        MaxNumberOfMessages: int = 1,
        VisibilityTimeout: int | None = None,
        WaitTimeSeconds: int = 0,
        AttributeNames: list[str] | None = None,
        MessageSystemAttributeNames: list[str] | None = None,
        MessageAttributeNames: list[str] | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Up to ``MaxNumberOfMessages`` visible messages, oldest first. ``WaitTimeSeconds`` does not
        wait: with a fake clock nothing arrives meanwhile (a test advances the clock instead)."""
        with self._lock:
            queue = self._queue(QueueUrl, "ReceiveMessage")
            now = self._now_ms()
            visibility = queue.visibility_seconds if VisibilityTimeout is None else int(VisibilityTimeout)
            wanted = {*(AttributeNames or []), *(MessageSystemAttributeNames or [])}
            out: list[dict[str, Any]] = []
            for message in list(queue.messages):
                if len(out) >= max(1, int(MaxNumberOfMessages)):
                    break
                if message.visible_ms > now:
                    continue
                if queue.redrive and message.receives >= queue.redrive["maxReceiveCount"]:
                    dlq = self._by_arn(queue.redrive["deadLetterTargetArn"])
                    queue.messages.remove(message)
                    if dlq is not None:
                        dlq.messages.append(message)
                    continue
                message.receives += 1
                if message.first_receive_ms is None:
                    message.first_receive_ms = now
                message.visible_ms = now + visibility * 1000
                message.receipt = f"{message.id}#{uuid.uuid4().hex}"
                message.receipts.add(message.receipt)
                out.append(self._answer(message, wanted, MessageAttributeNames))
            return {"Messages": out} if out else {}

    @staticmethod
    def _answer(message: _Message, wanted: set[str], attribute_names: list[str] | None) -> dict[str, Any]:
        system = {
            "SenderId": ACCOUNT,
            "SentTimestamp": str(message.sent_ms),
            "ApproximateReceiveCount": str(message.receives),
            "ApproximateFirstReceiveTimestamp": str(message.first_receive_ms),
        }
        if message.group is not None:
            system["MessageGroupId"] = message.group
        answer: dict[str, Any] = {
            "MessageId": message.id,
            "ReceiptHandle": message.receipt,
            "MD5OfBody": _md5(message.body),
            "Body": message.body,
        }
        attributes = system if "All" in wanted else {k: v for k, v in system.items() if k in wanted}
        if attributes:
            answer["Attributes"] = attributes
        if message.attributes and attribute_names:
            everything = "All" in attribute_names or ".*" in attribute_names
            chosen = {k: v for k, v in message.attributes.items() if everything or k in attribute_names}
            if chosen:
                answer["MessageAttributes"] = chosen
        return answer

    def _holding(self, queue: _Queue, receipt: str, operation: str) -> _Message:
        for message in queue.messages:
            if receipt in message.receipts:
                return message
        raise refused(
            "ReceiptHandleIsInvalid",
            f'The input receipt handle "{receipt}" is not a valid receipt handle.',
            operation,
        )

    def delete_message(self, QueueUrl: str, ReceiptHandle: str) -> dict[str, Any]:
        with self._lock:
            queue = self._queue(QueueUrl, "DeleteMessage")
            if ReceiptHandle in queue.deleted:  # deleting twice is not an error
                return {}
            message = self._holding(queue, ReceiptHandle, "DeleteMessage")
            queue.messages.remove(message)
            queue.deleted |= message.receipts
            return {}

    def change_message_visibility(
        self,
        QueueUrl: str,
        ReceiptHandle: str,
        VisibilityTimeout: int,
    ) -> dict[str, Any]:
        with self._lock:
            queue = self._queue(QueueUrl, "ChangeMessageVisibility")
            message = self._holding(queue, ReceiptHandle, "ChangeMessageVisibility")
            now = self._now_ms()
            until = now + int(VisibilityTimeout) * 1000
            if until - message.sent_ms > MAX_VISIBILITY_SECONDS * 1000:
                raise refused(
                    "InvalidParameterValue",
                    f"Value {VisibilityTimeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                    "VisibilityTimeout for the message is beyond the limit [43200 seconds]",
                    "ChangeMessageVisibility",
                )
            message.visible_ms = until
            return {}

    def change_message_visibility_batch(
        self, QueueUrl: str, Entries: list[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """:meth:`change_message_visibility` of up to ten received messages; an entry SQS refuses (a
        receipt handle not held, a visibility over 12 h) is in ``Failed`` with its code, the others
        change."""
        with self._lock:
            self._queue(QueueUrl, "ChangeMessageVisibilityBatch")
            _check_batch(Entries, "ChangeMessageVisibilityBatch")
            successful: list[dict[str, Any]] = []
            failed: list[dict[str, Any]] = []
            for entry in Entries:
                try:
                    self.change_message_visibility(
                        QueueUrl, str(entry["ReceiptHandle"]), int(entry["VisibilityTimeout"])
                    )
                except AwsRefused as exc:
                    error = exc.response.get("Error", {})
                    failed.append(
                        {
                            "Id": entry["Id"],
                            "SenderFault": True,
                            "Code": error.get("Code", ""),
                            "Message": error.get("Message", ""),
                        }
                    )
                else:
                    successful.append({"Id": entry["Id"]})
            return {"Successful": successful, "Failed": failed}

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str] | None = None) -> dict[str, Any]:
        with self._lock:
            queue = self._queue(QueueUrl, "GetQueueAttributes")
            now = self._now_ms()
            delayed = sum(1 for m in queue.messages if m.receives == 0 and m.visible_ms > now)
            in_flight = sum(1 for m in queue.messages if m.receives > 0 and m.visible_ms > now)
            every = {
                "QueueArn": queue.arn,
                "ApproximateNumberOfMessages": str(sum(1 for m in queue.messages if m.visible_ms <= now)),
                "ApproximateNumberOfMessagesDelayed": str(delayed),
                "ApproximateNumberOfMessagesNotVisible": str(in_flight),
                "VisibilityTimeout": str(queue.visibility_seconds),
                "DelaySeconds": str(queue.delay_seconds),
            }
            if queue.redrive:
                every["RedrivePolicy"] = json.dumps(
                    {
                        "deadLetterTargetArn": queue.redrive["deadLetterTargetArn"],
                        "maxReceiveCount": queue.redrive["maxReceiveCount"],
                    }
                )
            names = AttributeNames or []
            chosen = every if "All" in names else {k: v for k, v in every.items() if k in names}
            return {"Attributes": chosen}

    def purge_queue(self, QueueUrl: str) -> dict[str, Any]:
        with self._lock:
            self._queue(QueueUrl, "PurgeQueue").messages.clear()
            return {}

    # --- for tests ---------------------------------------------------------------------------------

    def peek(self, url: str) -> list[dict[str, Any]]:
        """Every message on the queue at ``url`` (delayed, visible or in flight, oldest first) as
        ``{"body", "group", "delay", "receives"}``, without receiving it: ``delay`` is the seconds it
        was sent with."""
        with self._lock:
            return [
                {
                    "body": m.body,
                    "group": m.group,
                    "delay": m.delay_seconds,
                    "receives": m.receives,
                }
                for m in self._queue(url, "ReceiveMessage").messages
            ]

    def url_of(self, arn: str) -> str:
        """The URL of the queue whose ARN is ``arn`` (what an SNS subscription names)."""
        with self._lock:
            queue = self._by_arn(arn)
            if queue is None:
                raise refused(
                    "AWS.SimpleQueueService.NonExistentQueue",
                    "The specified queue does not exist.",
                    "SendMessage",
                )
            return queue.url

    def bodies(self, url: str) -> list[str]:
        """Every message body on the queue at ``url``, delayed, visible or in flight, oldest first."""
        with self._lock:
            return [m.body for m in self._queue(url, "ReceiveMessage").messages]


def _check_batch(entries: list[Mapping[str, Any]], operation: str) -> None:
    """SQS's checks of a batch request's entries: one to ten, each ``Id`` once."""
    if not entries:
        raise refused("EmptyBatchRequest", "There should be at least one entry in the request.", operation)
    if len(entries) > 10:
        raise refused(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are 10. You have sent {len(entries)}.",
            operation,
        )
    ids = [str(e["Id"]) for e in entries]
    if len(set(ids)) != len(ids):
        raise refused("BatchEntryIdsNotDistinct", "Two or more batch entries have the same Id.", operation)


def _md5(body: str) -> str:
    return hashlib.md5(body.encode(), usedforsecurity=False).hexdigest()
