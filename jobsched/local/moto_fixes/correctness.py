"""Where moto does not do what AWS documents, and a guarantee of ours (DESIGN §2) or a figure of the
embedded mode rests on it. Each is a moto bug: docs/decisions/0042-emulator-boundary.md has an
upstream-ready reproduction of each, and ``tests/local/test_moto_bugs.py`` runs those against moto as
it is, so that the release which fixes one fails there and says which patch to drop.

**A message sent while another is deleted could vanish.** moto's ``Queue.delete_message`` rebuilds
the queue's message list without the lock that ``Queue.add_message`` appends under: it copies every
message but the deleted one into a new list, then assigns that list back. A message a concurrent
``SendMessage``/``SendMessageBatch`` appended in between (to the old list, or to the list another
delete assigned meanwhile) is dropped without a trace: the send answered with a ``MessageId``, no
queue (not the DLQ either) holds the message, and its run stays ``queued`` at attempt 0. The embedded
mode hits this whenever the API or the dispatcher sends while the pollers delete what the workers
finished: a 1000-run backfill lost one or two runs' messages in a few thousand (issue 10 §4). SQS
stores a message before it acknowledges the send; the sweeper still covers a lost message on AWS
(docs/semantics/runs.md). The fix holds the queue's own lock (``Queue._messages_lock``, a
``Condition`` over an ``RLock``) across the scan and the reassignment, so a send either lands before
the scan (and stays) or after the reassignment.

**Conditional writes were not atomic, and reads raced writes.** moto's DynamoDB evaluates a write's
condition and then applies the write without a lock, so two threads of its server writing the same
item can both pass a condition only one of them should (both see a bucket's old ``tat``, or no
holder in a semaphore's slot). DynamoDB applies each write, condition included, atomically;
everything that must happen once relies on that (claims, run creation, the rate limits' token
buckets). And a read copies the item it answers while a write may be changing it in place: the read
answers an item half-updated, or fails with ``RuntimeError: dictionary changed size during
iteration`` (an HTTP 500 from the server, which the SDK retries; in-process, as in the benchmarks, the
caller sees the error: a workflow's advance after a node failed so, and the run waited for the
sweeper). The fix runs every DynamoDB operation of the emulator that reads or writes items
(:data:`DYNAMODB_WRITES`, :data:`DYNAMODB_READS`) under one lock of its process (:data:`WRITE_LOCK`).
moto's handlers hold the interpreter lock anyway, so little concurrency is lost. moto answers a
``GetItem`` (and each key of a ``BatchGetItem`` or ``TransactGetItems``) with the stored item itself,
written out after the backend returns, outside the lock: a write meanwhile changed it under the
answer (half-updated again). The item a ``get_item`` returns is therefore a copy taken under the lock
(moto's ``Query`` and ``Scan`` copy their items already).

**Two receives at once could both take a message, or one lose what it took.** moto's
``SQSBackend.receive_message`` scans the queue and marks what it takes without the queue's lock. Two
receives of one queue at once, on messages that became visible again when their visibility timeout
ended (still in the queue's pending set), race on that set: both take a message, or one fails
(``KeyError``, or ``RuntimeError: Set changed size during iteration``: an HTTP 500 from the server)
after it marked the messages it took before as received, so they stay invisible for the queue's whole
visibility timeout though nobody got them; the SDK's retry hides the failure, not the loss. The
embedded mode's fair poller runs five receivers on a queue and the fair share hands refused runs back
to it, so a lost batch's runs started a visibility timeout (60 s) late (the likely cause of a lone
bursting tenant's 300 runs taking 63 s instead of 12 s to start, once: docs/performance.md). SQS
returns a received message to no other receive during its visibility timeout. The fix runs
``receive_message`` and ``change_message_visibility`` under the queue's own lock, as the delete above;
the long poll's wait between scans still lets it go (a ``Condition`` over an ``RLock`` releases every
level while it waits).

**A long poll saw a message that became visible only up to a second late.** Between two scans,
moto's ``receive_message`` waits with ``Queue.wait_for_messages(1)``, a ``Condition.wait_for`` on the
queue's *visible* messages: a send notifies it at once, but a delayed message reaching its instant (or
a received one whose visibility timeout ends) notifies nothing, so a long poll in flight noticed it
only when the second ran out. SQS's long poll returns a message as soon as it is available; the
embedded mode's runs start within a second of their instant only if it does. The fix waits until the
earliest instant at which a message of the queue becomes visible (its delay or its visibility
timeout ends; :data:`VISIBLE_MARGIN_SECONDS` after it, as moto counts a message visible only after
that instant), or until a send or a change of visibility (``ChangeMessageVisibility``, which now
notifies the queue's waiters) wakes it, at most moto's second. A long poll therefore sees such a
message when it becomes visible, and a queue with nothing in flight is not scanned again before a
send or the second (until 2026-12-08 the fix woke every 0.2 s: 15 looks a second at each idle queue).

**A task token's success could be lost when it came at once.** For a ``.waitForTaskToken`` task with
``HeartbeatSeconds``, moto's interpreter sends the task's message first and only then gives the
token's ``CallbackEndpoint`` its ``HeartbeatEndpoint`` (``setup_heartbeat_endpoint``), on which the
task waits. A ``SendTaskSuccess`` that arrives in between records the outcome and wakes nothing (there
is no heartbeat endpoint yet); the new one starts unset, so the task waits out its heartbeat and
fails with ``States.HeartbeatTimeout`` although it succeeded. Step Functions takes a success whenever
it arrives after the token was issued. A worker that answers a chunk within milliseconds of its
message hits this: the chunked job's Map then never ends (``tests/infra/test_asl_moto.py`` failed
about one run in twelve). The fix starts a heartbeat endpoint set up after the outcome as notified.
"""

from __future__ import annotations

import copy
import functools
import threading
import time
from typing import Any

_APPLIED = "_jobsched_correctness"  # on a patched method: this module's patch is in place

#: How long after a message's visibility instant (its delay's or visibility timeout's end) a long poll
#: waiting for it looks again: moto counts a message visible only once its clock is past that instant.
VISIBLE_MARGIN_SECONDS = 0.002
#: The DynamoDB item operations of the emulator, one at a time (each is atomic on DynamoDB).
WRITE_LOCK = threading.RLock()
DYNAMODB_WRITES = ("put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items")
DYNAMODB_READS = ("get_item", "query", "scan", "batch_get_item", "transact_get_items")


def apply() -> None:
    """Patch moto's DynamoDB item operations to run one at a time, its SQS ``Queue.delete_message``,
    ``receive_message`` and ``change_message_visibility`` to run under the queue's message lock (a
    change of visibility waking the queue's long polls), its long polls to look again when a message
    of the queue becomes visible rather than a second later, and its Step Functions task tokens to
    keep a success that came before the heartbeat's wait (once)."""
    _atomic_dynamodb_items()
    _sqs_delete_under_lock()
    _sqs_receive_under_lock()
    _sqs_long_poll_wakes_on_time()
    _sfn_outcome_before_heartbeat_setup()


def _atomic_dynamodb_items() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    for name in DYNAMODB_WRITES + DYNAMODB_READS:
        original = getattr(DynamoDBBackend, name)
        if getattr(original, _APPLIED, False):
            continue

        def locked(
            *args: Any, _original: Any = original, _snapshot: bool = name == "get_item", **kwargs: Any
        ) -> Any:
            with WRITE_LOCK:
                result = _original(*args, **kwargs)
                # The stored item itself, written out after the lock is released: answer a copy.
                return copy.deepcopy(result) if _snapshot else result

        functools.update_wrapper(locked, original)
        setattr(locked, _APPLIED, True)
        setattr(DynamoDBBackend, name, locked)


def _sqs_delete_under_lock() -> None:
    from moto.sqs.models import Queue

    original = Queue.delete_message
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            original(self, receipt_handle)

    setattr(delete_message, _APPLIED, True)
    Queue.delete_message = delete_message  # type: ignore[method-assign]


def _sqs_receive_under_lock() -> None:
    """moto's ``SQSBackend.receive_message`` and ``change_message_visibility`` run under the queue's
    message lock (``Queue._messages_lock``, as the delete above): one receive's scan of the queue, and
    the marking of what it takes, at a time. The long poll's wait between scans still lets the lock go
    (a ``Condition`` over an ``RLock`` releases every level while it waits)."""
    from moto.sqs.models import SQSBackend

    for name in ("receive_message", "change_message_visibility"):
        original = getattr(SQSBackend, name)
        if getattr(original, _APPLIED, False):
            continue

        def under_lock(
            self: Any,
            queue_name: str,
            *args: Any,
            _original: Any = original,
            _notify: bool = name == "change_message_visibility",
            **kwargs: Any,
        ) -> Any:
            lock = self.get_queue(queue_name)._messages_lock
            with lock:
                result = _original(self, queue_name, *args, **kwargs)
                if _notify:  # a message made visible (or visible sooner): the long polls look again
                    lock.notify_all()
                return result

        functools.update_wrapper(under_lock, original)
        setattr(under_lock, _APPLIED, True)
        setattr(SQSBackend, name, under_lock)


def _seconds_until_visible(queue: Any) -> float | None:
    """Seconds until the first of ``queue``'s messages that is not visible now becomes visible (its
    delay or its visibility timeout ends), plus :data:`VISIBLE_MARGIN_SECONDS`; None when none will
    (no message, or every one visible). Read under the queue's message lock."""
    from moto.core.utils import unix_time_millis

    now = unix_time_millis()
    instants = (max(m.visible_at, m.delayed_until) for m in queue._messages)
    soonest = min((at for at in instants if at >= now), default=None)
    return None if soonest is None else (soonest - now) / 1000 + VISIBLE_MARGIN_SECONDS


def _sqs_long_poll_wakes_on_time() -> None:
    from moto.sqs.models import Queue

    original = Queue.wait_for_messages
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def wait_for_messages(self: Any, timeout: int) -> None:
        # moto's own wait, a Condition.wait_for on the visible messages for ``timeout``, but woken too
        # when the next message becomes visible: sooner is looked up again after every notification
        # (a send, a change of visibility), since what is in the queue may have changed.
        deadline = time.monotonic() + timeout
        with self._messages_lock:
            while not self.messages:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                sooner = _seconds_until_visible(self)
                self._messages_lock.wait(left if sooner is None else min(left, sooner))

    setattr(wait_for_messages, _APPLIED, True)
    Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]


def _sfn_outcome_before_heartbeat_setup() -> None:
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint

    original = CallbackEndpoint.setup_heartbeat_endpoint
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def setup_heartbeat_endpoint(self: Any, heartbeat_seconds: int) -> Any:
        endpoint = original(self, heartbeat_seconds)
        # An outcome that came before this endpoint existed woke nothing: the task's wait must see it.
        # (One that comes after the assignment above notifies this endpoint itself.)
        if self.get_outcome() is not None:
            endpoint.notify()
        return endpoint

    setattr(setup_heartbeat_endpoint, _APPLIED, True)
    CallbackEndpoint.setup_heartbeat_endpoint = setup_heartbeat_endpoint  # type: ignore[method-assign]
