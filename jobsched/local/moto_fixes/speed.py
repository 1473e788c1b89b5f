"""Patches that only make moto fast enough, and small enough, to run the embedded mode for hours and
the benchmarks at their scale: each leaves what moto answers as it was (``tests/local/test_moto_fixes.py``
checks each against moto's own behaviour). None is a moto bug in behaviour; each is moto doing work,
or keeping memory, that its answers do not need. The DynamoDB ones are in :mod:`.speed_dynamodb`.

**Deleted receipt handles were kept for ever.** moto remembers every receipt handle of every deleted
message (``Queue.deleted_messages``, so that deleting twice succeeds, as on SQS), a set that only
grows: tens of thousands of handles an hour with a few per-second jobs (issue 12 §6). The fix keeps
the newest :data:`KEEP_DELETED_HANDLES` of them (insertion order), enough for any handle a poller still
holds (a batch is deleted within its visibility timeout).

**Every message sent scanned the whole queue three times.** moto's ``SQSBackend.send_message`` (and
so ``SendMessageBatch``, which calls it per entry) reads ``queue.attributes`` to learn whether the
queue deduplicates by content; that property computes *every* attribute, among them
``ApproximateNumberOfMessages``, ``…Delayed`` and ``…NotVisible``, each a pass over every message in
the queue with a clock read per message. A send therefore cost time in proportion to the messages
already queued (in flight and delayed included), and a backfill of *n* runs, whose messages all sit in
one queue, cost O(n²): profiled, one ``SendMessageBatch`` of 10 into a queue holding 1000 messages
made 40,190 clock reads and took 0.25–0.43 s; ten thousand delayed messages of a burst made each
batch seconds long. SQS itself does no such thing. The fix answers ``queue.attributes`` during a send
with the one attribute a send reads (``ContentBasedDeduplication``, FIFO queues only); every other
reader (``GetQueueAttributes``, the backpressure's depth reads) still gets the full, live attributes.

**Every message received scanned the whole queue three times.** The same ``queue.attributes``
computation ran once per message *received*: moto's ``receive_message`` checks each message it hands
out against the queue's retention period through ``get_queue_attributes(..., ["MessageRetentionPeriod"])``,
which computes every attribute first. A receive of 10 from a queue holding 2000 messages took 1–5 s
in the embedded mode (profiled: 30 passes over the queue per receive), so a burst's backlog was
drained at a few batches every few seconds while the worker slots stood idle, and a quiet tenant's
run waited 60–95 s behind a 2000-run burst with fair queues on or off (issue 13 §6). The fix reads
the queue's ``message_retention_period`` directly, as the attributes would.

**Every item and message moto ever made was kept.** moto's ``BaseModel.__new__`` appends each
instance of a model class to that class's ``instances_tracked`` list, for moto's dashboard, and
nothing ever removes them while the server runs. DynamoDB deep-copies an item for every write (the
old image) and every read (the answer), through ``__new__``, so every copy of every item stayed
alive: four tracked ``Item`` objects per item after a put, a get, a query and an update of it; in the
embedded mode the DynamoDB process grew about 53 KB per run (32 MB a minute with ten per-second
jobs) and ~1.3 MB a minute with only the demo jobs (issue 12 §6), whatever the retention deleted.
SQS's ``Message`` was tracked the same way. The fix gives DynamoDB's ``Item`` and ``Table`` and SQS's
``Message`` a ``__new__`` that does not track (nothing but the dashboard reads those lists; S3's
``FakeKey`` tracking, which moto uses to close its files, is left alone), so an item lives as long
as a table or a caller holds it.

**Every request listed its handler's methods.** moto's ``BaseResponse.call_action`` listed its
handler's methods with ``inspect.getmembers`` at every request of every service; the list is kept per
class (made again when a class of its MRO gains or loses an attribute).

**Every request listed moto's package directory.** The server's ``DomainDispatcherApplication``
finds a request's service with ``host in backends.list_of_moto_modules()``, a generator that lists
moto's package directory and calls ``os.path.isdir`` on each of its ~175 entries, at every request:
0.25 ms of each request's CPU on this machine, about a quarter of what an idle embedded mode's
emulator spent serving requests (profiled with py-spy, 2026-12-06). The directory does not change
while the server runs; the fix lists it once per process.

**Every emulator imported moto's EC2 to create a state machine.** With ``execute_state_machine`` on
(the embedded mode's Step Functions run their ASL), moto's first Step Functions request imports its
ASL interpreter, whose Batch task module imports ``moto.batch.utils`` for one enum. Importing any
module of the ``moto.batch`` package runs its ``__init__``, which imports Batch's models, and they
import EC2's, ECS's, IAM's and CloudWatch Logs' models: EC2's load their region, zone and instance
type tables at import. Measured with ``python -X importtime`` (2026-12-06): the interpreter's import
took 1.12 s, 0.87 s of it ``moto.ec2`` (0.12 s without Batch's models), paid by the emulator of every
embedded mode and ``jobsched dev`` at start-up (it creates the state machine) -- about a quarter of
the CPU a ``jobsched dev`` needs to start. The fix registers ``moto.batch`` as its package without running its
``__init__``: its submodules import as before, and ``batch_backends`` (what the ``__init__`` imported)
is imported from ``moto.batch.models`` the first time it is read, so Batch itself works as it did.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

from jobsched.local.moto_fixes import speed_dynamodb

_APPLIED = "_jobsched_speed"  # on a patched method: this module's patch is in place
#: Receipt handles of deleted messages a queue remembers (the oldest are forgotten first).
KEEP_DELETED_HANDLES = 10_000


class BoundedHandles(dict[Any, None]):
    """A set-like record of deleted receipt handles that forgets the oldest past a bound."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def update(self, handles: Any) -> None:  # type: ignore[override]
        for handle in handles:
            self[handle] = None
        while len(self) > self.limit:
            del self[next(iter(self))]

    def add(self, handle: Any) -> None:
        self.update([handle])


def apply() -> None:
    """Patch moto's SQS to keep a bounded record of deleted receipt handles and not to count the
    queue's messages at every send and receive, its items and messages not to be kept for its
    dashboard, its handlers' method lists to be made once per class, its package directory to be listed
    once, and its DynamoDB as
    :func:`.speed_dynamodb.apply` does (once)."""
    _sqs_deleted_handles_bounded()
    _sqs_send_without_counting()
    _sqs_receive_without_counting()
    _models_untracked()
    _responses_list_their_methods_once()
    _moto_modules_listed_once()
    _batch_models_imported_on_use()
    speed_dynamodb.apply()


def _sqs_deleted_handles_bounded() -> None:
    from moto.sqs.models import Queue

    original = Queue.delete_message
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def delete_message(self: Any, receipt_handle: str) -> None:
        if not isinstance(self.deleted_messages, BoundedHandles):
            with self._messages_lock:  # no delete adds to the set while it is copied
                if not isinstance(self.deleted_messages, BoundedHandles):
                    kept = BoundedHandles(KEEP_DELETED_HANDLES)
                    kept.update(self.deleted_messages)
                    self.deleted_messages = kept
        original(self, receipt_handle)

    setattr(delete_message, _APPLIED, True)
    Queue.delete_message = delete_message  # type: ignore[method-assign]


def _sqs_receive_without_counting() -> None:
    from moto.sqs import models
    from moto.sqs.models import SQSBackend

    original = SQSBackend.is_message_valid_based_on_retention_period
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention_period = int(self.get_queue(queue_name).message_retention_period)
        # moto's own clock, looked up at each call as moto's check does (the benchmarks replace it).
        return bool(retention_period + message.sent_timestamp / 1000 > models.unix_time())

    setattr(is_message_valid_based_on_retention_period, _APPLIED, True)
    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]


def _untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    return object.__new__(cls)


def _models_untracked() -> None:
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table
    from moto.sqs.models import Message

    for model in (Item, Table, Message):
        if model.__dict__.get("__new__") is None:
            model.__new__ = _untracked_new  # type: ignore[method-assign]
        model.instances_tracked.clear()  # type: ignore[union-attr]


_SENDING = threading.local()


def _sqs_send_without_counting() -> None:
    from moto.sqs.models import Queue, SQSBackend

    original_send = SQSBackend.send_message
    if getattr(original_send, _APPLIED, False):
        return
    full_attributes: property = Queue.__dict__["attributes"]

    @functools.wraps(original_send)
    def send_message(self: Any, *args: Any, **kwargs: Any) -> Any:
        depth = getattr(_SENDING, "depth", 0)
        _SENDING.depth = depth + 1
        try:
            return original_send(self, *args, **kwargs)
        finally:
            _SENDING.depth = depth

    def attributes(self: Any) -> dict[str, Any]:
        if getattr(_SENDING, "depth", 0):
            # All a send reads (moto: send_message, Queue.add_message): content-based deduplication.
            if not self.fifo_queue:
                return {}
            return {"ContentBasedDeduplication": str(bool(self.content_based_deduplication)).lower()}
        return full_attributes.__get__(self)

    setattr(send_message, _APPLIED, True)
    SQSBackend.send_message = send_message  # type: ignore[method-assign]
    Queue.attributes = property(attributes)  # type: ignore[assignment,method-assign]


def _responses_list_their_methods_once() -> None:
    """moto's ``BaseResponse.call_action`` lists its handler class's methods with ``inspect.getmembers``
    at every request, to see whether the action is one; the list is kept per class (and made again
    when a class of its MRO gains or loses an attribute)."""
    from moto.core import responses

    original = responses.method_names_from_class
    if getattr(original, _APPLIED, False):
        return
    listed: dict[Any, list[str]] = {}

    @functools.wraps(original)
    def method_names_from_class(clazz: Any) -> list[str]:
        key = (clazz, *(len(vars(c)) for c in getattr(clazz, "__mro__", ())))
        names = listed.get(key)
        if names is None:
            names = listed[key] = original(clazz)
        return names

    setattr(method_names_from_class, _APPLIED, True)
    responses.method_names_from_class = method_names_from_class


def _moto_modules_listed_once() -> None:
    """``moto.backends.list_of_moto_modules`` lists moto's package directory (an ``isdir`` per entry) at
    every call, and the server's dispatcher calls it at every request; the list is made once."""
    from moto import backends

    original = backends.list_of_moto_modules
    if getattr(original, _APPLIED, False):
        return
    listed: list[tuple[str, ...]] = []

    @functools.wraps(original)
    def list_of_moto_modules() -> tuple[str, ...]:
        if not listed:
            listed.append(tuple(original()))
        return listed[0]

    setattr(list_of_moto_modules, _APPLIED, True)
    backends.list_of_moto_modules = list_of_moto_modules


#: The package whose ``__init__`` imports its models (and EC2's with them), and what that imported.
LAZY_PACKAGE = "moto.batch"
LAZY_NAMES = {"batch_backends": "moto.batch.models"}


def _batch_models_imported_on_use() -> None:
    """Register ``moto.batch`` without running its ``__init__`` (which imports Batch's models and,
    through them, EC2's): its submodules import as before, and the names the ``__init__`` imported are
    imported on first use. Nothing is done if the package is imported already (or is not moto's)."""
    if LAZY_PACKAGE in sys.modules:
        return
    spec = importlib.util.find_spec(LAZY_PACKAGE)
    if spec is None or spec.submodule_search_locations is None:
        return
    package = importlib.util.module_from_spec(spec)  # a package: __path__, __spec__, no code run

    def __getattr__(name: str) -> Any:
        source = LAZY_NAMES.get(name)
        if source is None:
            raise AttributeError(f"module {LAZY_PACKAGE!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(package, name, value)
        return value

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    setattr(package, _APPLIED, True)
    sys.modules[LAZY_PACKAGE] = package
    parent, _, child = LAZY_PACKAGE.rpartition(".")
    setattr(sys.modules[parent], child, package)


def lazy_package(module: ModuleType) -> bool:
    """Whether ``module`` is a package this module registered without running its ``__init__``."""
    return bool(getattr(module, _APPLIED, False))
