"""Queue pollers: what a Lambda SQS event source mapping does, for the embedded mode.

One poller per queue receives batches (long polls of ``wait_seconds``; a stop abandons the one in flight
at once, since what it receives after the stop is never handed out; up to ``MAX_RECEIVERS`` receives at
once while a burst lasts, one while the queue is idle), turns them into the exact SQS event Lambda
delivers, invokes the handler on a thread pool sized by the queue's reserved worker slots (so ``low``
can never take ``high``'s slots), and then deletes the records the handler did not report in
``batchItemFailures``. Failed records are left alone: they come back after the visibility timeout and,
after ``maxReceiveCount`` receives, SQS redrives them to the DLQ -- exactly as on AWS. A handler that
raises, or reports an unknown item identifier, fails the whole batch, as Lambda does.

Latency: every queue is long-polled (``wait_seconds``; ``idle_seconds`` apart only when
``wait_seconds`` is 0). With :mod:`jobsched.local.moto_fixes` applied, as the embedded mode does, a
long poll wakes at once for a newly sent message or a change of visibility, and sees a *delayed*
message when it becomes visible (moto alone: up to a second later), so a run queued ahead with
``DelaySeconds`` is received on time without short polls.

Early runs are gathered (a difference from AWS, on purpose): ``DelaySeconds`` is whole seconds, so a
run's message surfaces up to 1 s before its instant and the worker waits out the rest. Messages for
runs due in the same second surface spread over that second, and a poller handing each one out as it
comes would fill every worker slot with batches of one or two that all wait for the same instant --
the rest of the burst then waits for a slot to free. A partial batch whose runs are all still more than
``GATHER_MARGIN_SECONDS`` from due is therefore kept open, and topped up with short polls, until it is
full or its earliest run is that close (at most the 1 s a message can be early). On AWS an
invocation's writes take milliseconds, so slots free almost at once after the instant; in the
emulator they take moto's tens of milliseconds each, which is why the emulator needs this and AWS does
not. A message that is not a run (a chunk task, anything else) or is due already is never held.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.instants import from_iso

log = logging.getLogger(__name__)

MAX_BATCH = 10  # SQS ReceiveMessage and DeleteMessageBatch limit
#: A partial batch of runs is handed out when its earliest run is this close to due (see module doc).
GATHER_MARGIN_SECONDS = 0.1
#: Receivers per queue during a burst (a Lambda SQS event source mapping starts with five pollers);
#: only the first polls an idle queue, the others join while receives keep finding messages.
MAX_RECEIVERS = 5
#: Pause between the short polls that top up a gathering batch.
GATHER_POLL_SECONDS = 0.02
#: How often a stop looks again whether a receiver it waits for has ended or started a long poll.
JOIN_STEP_SECONDS = 0.05


def due_epoch(body: str) -> float | None:
    """The due instant (epoch seconds) of a run message body; None for anything else."""
    try:
        return from_iso(json.loads(body)["due_at"]).timestamp()
    except (ValueError, TypeError, KeyError, AttributeError, ValidationError):
        return None


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


class Slots:
    """A semaphore whose size can change while it is held (the capacity service's ceiling, decision
    0055): shrinking takes effect as held slots are released, growing at once."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self._cond = threading.Condition()

    def acquire(self, timeout: float | None = None) -> bool:
        with self._cond:
            if not self._cond.wait_for(lambda: self.held < self.limit, timeout=timeout):
                return False
            self.held += 1
            return True

    def release(self) -> None:
        with self._cond:
            self.held -= 1
            self._cond.notify()

    def resize(self, limit: int) -> None:
        with self._cond:
            self.limit = limit
            self._cond.notify_all()


class QueuePoller:
    """Feeds one queue to one handler with at most ``slots`` concurrent invocations (resizable:
    :meth:`resize`, the embedded mode's capacity, decision 0055)."""

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
        self._fast = wait_seconds == 0
        self._visibility: float | None = None
        self.name = name or queue_arn.rsplit(":", 1)[-1]
        self._free = Slots(slots)
        self._thread: threading.Thread | None = None
        self._helpers: list[threading.Thread] = []
        self._active = threading.Event()  # set while receives find messages: the helpers poll too
        self._busy: set[threading.Thread] = set()
        self._long_polls: set[threading.Thread] = set()  # receivers waiting in a long poll right now
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"poller-{self.name}", daemon=True)
        self._helpers = [
            threading.Thread(target=self._helper_loop, name=f"poller-{self.name}-{i}", daemon=True)
            for i in range(1, min(self.slots, MAX_RECEIVERS))
        ]
        for thread in [self._thread, *self._helpers]:
            thread.start()

    def resize(self, slots: int) -> None:
        """Allow ``slots`` concurrent invocations from now on (at least 1; the receivers started with
        the poller stay as they are)."""
        if slots < 1:
            raise ValueError("a queue poller needs at least one worker slot")
        self.slots = slots
        self._free.resize(slots)

    @property
    def busy(self) -> int:
        """How many batches are being handled right now."""
        with self._lock:
            return len(self._busy)

    def join(self, timeout: float) -> None:
        """After ``stop`` is set: wait up to ``timeout`` s for the receive loop and the running batches.

        Batch threads are daemons: a handler still running at the deadline is abandoned (its messages
        come back after their visibility timeout, as after a Lambda crash) so shutdown stays prompt.
        A receiver waiting in a long poll is not waited for: it holds no message, and whatever its
        receive returns after the stop is never handed out (it surfaces again after its visibility
        timeout, as it would at the deadline), so waiting for it only made every stop last the grace.
        """
        deadline = time.monotonic() + timeout
        for receiver in [self._thread, *self._helpers]:
            if receiver is not None:
                self._join_receiver(receiver, deadline)
        with self._lock:
            running = list(self._busy)
        for thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _join_receiver(self, receiver: threading.Thread, deadline: float) -> None:
        """Wait until ``receiver`` has ended, is waiting in a long poll, or ``deadline`` has passed."""
        while receiver.is_alive():
            with self._lock:
                if receiver in self._long_polls:
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            receiver.join(min(JOIN_STEP_SECONDS, left))

    def _loop(self) -> None:
        """The first receiver: polls whenever the queue may hold something, and wakes the others."""
        while not self.stop_event.is_set():
            handed = self._poll_once()
            if handed:
                self._active.set()
            elif handed is False and self._fast:
                self.stop_event.wait(self.idle_seconds)

    def _helper_loop(self) -> None:
        """A further receiver: polls only while receives find messages (a burst), then rests."""
        while not self.stop_event.is_set():
            if not self._active.wait(timeout=0.5):
                continue
            if self._poll_once(short=True) is False:
                self._active.clear()

    def _poll_once(self, *, short: bool = False) -> bool | None:
        """Take a slot, receive, hand a batch to a new invocation thread.

        True when a batch was handed out, False when the receive was empty, None when no slot was
        free or the receive failed.
        """
        # A slot is taken before receiving, so no message waits out its visibility in our hands.
        if not self._free.acquire(timeout=0.5):
            return None
        try:
            messages = self._receive(short=short)
        except Exception:
            self._free.release()
            if not self.stop_event.is_set():
                log.exception("receive from %s failed", self.name)
                self.stop_event.wait(1.0)
            return None
        if not messages or self.stop_event.is_set():
            self._free.release()
            return False if not messages else None
        try:
            messages = self._gather(messages)
        except Exception:  # what was gathered so far is handed out; the failure is moto's, logged
            if not self.stop_event.is_set():
                log.exception("topping up a batch from %s failed", self.name)
        thread = threading.Thread(
            target=self._run_batch, args=(messages,), name=f"worker-{self.name}", daemon=True
        )
        with self._lock:
            self._busy.add(thread)
        thread.start()
        return True

    def _gather(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Top up a partial batch of runs not yet due (see the module docstring); returns the batch.

        Never for longer than half the queue's visibility timeout, so a held message cannot surface
        again meanwhile (a message received twice is kept once, with its latest receipt handle).
        """
        batch = {m["MessageId"]: m for m in messages}
        until = time.monotonic() + self._visibility_seconds() / 2
        while len(batch) < self.batch_size and not self.stop_event.is_set():
            dues = [due_epoch(m.get("Body", "")) for m in batch.values()]
            if any(d is None for d in dues):
                break
            left = min(
                min(d for d in dues if d is not None) - GATHER_MARGIN_SECONDS - time.time(),
                until - time.monotonic(),
            )
            if left <= 0:
                break
            more = self._receive(self.batch_size - len(batch), short=True)
            batch.update((m["MessageId"], m) for m in more)
            if not more:
                self.stop_event.wait(min(GATHER_POLL_SECONDS, left))
        return list(batch.values())

    def _visibility_seconds(self) -> float:
        if self._visibility is None:
            attributes = self.sqs.get_queue_attributes(
                QueueUrl=self.queue_url, AttributeNames=["VisibilityTimeout"]
            )["Attributes"]
            self._visibility = float(attributes.get("VisibilityTimeout", 30))
        return self._visibility

    def _receive(self, count: int | None = None, *, short: bool = False) -> list[dict[str, Any]]:
        wait = 0 if short or self._fast else self.wait_seconds
        receiver = threading.current_thread()
        if wait:
            with self._lock:
                self._long_polls.add(receiver)
        try:
            response = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=count or self.batch_size,
                WaitTimeSeconds=wait,
                AttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
        finally:
            if wait:
                with self._lock:
                    self._long_polls.discard(receiver)
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
