"""Batched sends of run messages to the priority queues.

``SendMessageBatch`` takes at most 10 entries and 256 KiB in total; entries are grouped per queue and
split on both limits. ``MessageGroupId`` is the tenant (SQS fair queues: one noisy tenant cannot
starve the others), ``DelaySeconds`` holds the message until the run's due instant. Entries SQS
refuses are retried once; whatever still fails is reported so the caller does not advance the job
(the next tick re-sends: duplicates are harmless because the worker's claim is conditional).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobsched.aws.metering import Meter
from jobsched.core.messages import RunMessage

MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024 - 4 * 1024  # keep a margin for attributes and group ids


@dataclass(frozen=True)
class Outgoing:
    """One message to send: which queue, the body, and its delay."""

    queue: str  # high | default | low | long
    message: RunMessage
    delay_seconds: int

    @property
    def key(self) -> str:
        return f"{self.message.run_id}@{self.message.attempt}"


@dataclass
class SendReport:
    sent: list[str] = field(default_factory=list)  # Outgoing.key of each message SQS accepted
    failed: dict[str, str] = field(default_factory=dict)  # Outgoing.key -> error


class RunQueues:
    def __init__(self, sqs: Any, queue_urls: Mapping[str, str], meter: Meter | None = None):
        self.sqs = sqs
        self.queue_urls = dict(queue_urls)
        self.meter = meter or Meter()

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
            response = self.sqs.send_message_batch(QueueUrl=url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:
            self.meter.record_sqs("SendMessageBatch", [len(b.encode()) for b in bodies])
            return {o.key: str(exc) for o in batch}
        self.meter.record_sqs("SendMessageBatch", [len(b.encode()) for b in bodies])
        return {
            batch[int(f["Id"])].key: f.get("Message", f.get("Code", "failed"))
            for f in response.get("Failed", [])
        }


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
