"""Fixes to the emulator's thread safety that the embedded mode needs (moto 5.x), applied before its
server starts (and by the benchmarks, whose worker threads share moto in-process).

**A message sent while another is deleted could vanish.** moto's ``Queue.delete_message`` rebuilds
the queue's message list without the lock that ``Queue.add_message`` appends under: it copies every
message but the deleted one into a new list, then assigns that list back. A message a concurrent
``SendMessage``/``SendMessageBatch`` appended in between is in the old list only, so it is dropped
without a trace: the send answered with a ``MessageId``, no queue (not the DLQ either) holds the
message, and its run stays ``queued`` at attempt 0. The embedded mode hits this whenever the API or
the dispatcher sends while the pollers delete what the workers finished: a 1000-run backfill lost one
or two runs' messages in a few thousand (issue 10 §4). Real SQS does not lose an acknowledged send;
the sweeper still covers a lost message on AWS (docs/semantics/runs.md).

The fix holds the queue's own lock (``Queue._messages_lock``, a ``Condition`` over an ``RLock``) across
the scan and the reassignment, so a send either lands before the scan (and stays) or after the
reassignment.

**Deleted receipt handles were kept for ever.** moto remembers every receipt handle of every deleted
message (``Queue.deleted_messages``, so that deleting twice succeeds, as on SQS), a set that only
grows: tens of thousands of handles an hour with a few per-second jobs (issue 12 §6). The fix keeps
the newest :data:`KEEP_DELETED_HANDLES` of them (insertion order), enough for any handle a poller still
holds (a batch is deleted within its visibility timeout).

**Conditional writes were not atomic, and reads raced writes.** moto's DynamoDB evaluates a write's
condition and then applies the write without a lock, so two threads of its server writing the same
item can both pass a condition only one of them should (both see a bucket's old ``tat``, or no
holder in a semaphore's slot). DynamoDB applies each write, condition included, atomically;
everything that must happen once relies on that (claims, run creation, the rate limits' token
buckets). And a read deep-copies the items it answers while a write may be changing one of them in
place: the read fails with ``RuntimeError: dictionary keys changed during iteration`` (an HTTP 500
from the server, which the SDK retries; in-process, as in the benchmarks, the caller sees the error:
a workflow's advance after a node failed so, and the run waited for the sweeper). The fix runs every
DynamoDB operation of the emulator that reads or writes items (``PutItem``, ``UpdateItem``,
``DeleteItem``, ``BatchWriteItem``, ``TransactWriteItems``, ``GetItem``, ``Query``, ``Scan``,
``BatchGetItem``, ``TransactGetItems``) under one lock of its process. moto's handlers hold the
interpreter lock anyway, so little concurrency is lost.

**One tenant's burst queued every other tenant's requests behind it.** moto's server handles each
request in a thread, and the threads share one interpreter: with the 200 requests of a burst's
running runs (claims, completions, the backfill's writes) in the DynamoDB process at once, a quiet
tenant's request got about a two-hundredth of the process while it was parsed, served and answered,
and waited behind a random share of them for the item lock: each of its requests took up to a second
or two (issue 13 §6: 2.5 s of a quiet run's 4 s p99 lag were its own trigger's writes). On AWS a
request does not wait for another tenant's: DynamoDB serves them on separate capacity. Now each
request names the tenant it is made for in the ``x-jobsched-lane`` header (set by the embedded
mode's clients, :func:`jobsched.aws.clients.set_lane_source`: the run's tenant in a worker, the
caller in the API, the backfill's tenant, "" for the system's own ticks and sweeps), and moto's
server handles at most :data:`LANE_CONCURRENCY` requests of one lane at once — the whole request,
from reading its body to making its answer, under the lane's semaphore (a request without the
header, from any other client, is not held); the others of that lane wait, costing nothing. A quiet
tenant's request then shares the process with a few requests per busy tenant, not with the burst's
hundreds. A handful per lane keeps the one core moto can use busy, so a burst is not served slower.
(Tried first and measured no better: handing the item lock out in turns, and the lane's semaphore
around the operation alone — the time went in the requests' reading and answering, which hundreds of
threads shared.)

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

**Every message received scanned the whole queue three times.** The same ``queue.attributes``
computation ran once per message *received*: moto's ``receive_message`` checks each message it hands
out against the queue's retention period through ``get_queue_attributes(..., ["MessageRetentionPeriod"])``,
which computes every attribute first. A receive of 10 from a queue holding 2000 messages took 1–5 s
in the embedded mode (profiled: 30 passes over the queue per receive), so a burst's backlog was
drained at a few batches every few seconds while the worker slots stood idle, and a quiet tenant's
run waited 60–95 s behind a 2000-run burst with fair queues on or off (issue 13 §6). The fix reads
the queue's ``message_retention_period`` directly, as the attributes would.

**A long poll saw a message that became visible only up to a second late.** Between two scans, moto's
``receive_message`` waits with ``Queue.wait_for_messages(1)``, a ``Condition.wait_for`` on the queue's
*visible* messages: a send notifies it at once, but a delayed message reaching its instant (or a
received one whose visibility timeout ends) notifies nothing, so a long poll in flight noticed it
only when the second ran out. The embedded mode's pollers used to short-poll every 0.5 s while a
queue held delayed messages, and ask moto once a second whether it did (``GetQueueAttributes``): most
of the requests an idle embedded mode made. The fix waits at most :data:`LONG_POLL_RESCAN_SECONDS`
between scans, so a long poll sees such a message within that time, and the pollers long-poll every
queue (``jobsched.local.pollers``).

**Every DynamoDB answer was built by walking the operation's output shape.** moto 5.2 serializes
each answer through its generic, shape-driven serializer: every attribute of every item returned is
looked up, type-checked and copied member by member (profiled in the cost benchmark: 5.4 million
value look-ups for 10,000 calls, 60 % of all the time moto spent serving them; a sweeper's
``BatchGetItem`` of 100 runs walked some 3,000 members). DynamoDB's answers are already in their wire
form once moto has expanded its own types (``dynamo_to_dict``), so for the item operations
(:data:`PLAIN_ANSWERS`) the fix writes that form out as JSON directly: ``None`` members left out,
binary values base64-encoded, as the serializer does. An answer holding anything else (a timestamp,
an object) goes through moto's serializer as before, and so do every error and every other
operation. ``tests/local/test_moto_fixes.py`` compares the answers both ways, as the SDK parses
them, for every item operation and attribute type.

**Every update re-parsed and re-checked its expression, and every query of an index sorted the whole
table in Python.** moto parses an ``UpdateItem``'s update expression twice per request (once to list
the names and values it uses, once to apply it), deep-copies the tree, then runs ten passes over the
copy, three of which depend on nothing but the text, its attribute names and the table's key
attributes (too many clauses, overlapping paths, a key attribute updated); and it tokenizes a condition
expression twice. Profiled in the cost benchmark, 56 % of the worker's time on the CPU went there; a
run's claim (an ``UpdateItem`` of six attributes under a condition) took 7.0 ms in-process, a
``GetItem`` 1 ms. The fix keeps the parse of each distinct text (:data:`KEEP_PARSED_EXPRESSIONS`; the
tree is only ever read, the validation works on a copy), makes each copy from the tree's pickle, skips
the three text-only passes for a text, names and table they passed before (a refusal is never
remembered: a refused text is checked again, and refused again), keeps what the kept tree's
``find_clauses`` found (the tree never changes; copies are searched as moto does), lets each pass build
its map from node class to method once rather than twice per node visited, and keeps the tokens of
each condition text (immutable; names and values are still looked up at every request): 2.9 ms per
claim. moto's ``BaseResponse.call_action`` also listed its handler's methods with
``inspect.getmembers`` at every request of every service; the list is kept per class (made again when
a class of its MRO gains or loses an attribute). And moto
answers every ``Query`` by sorting every item of the table (``Table.all_items``), comparing
``DynamoType`` objects through Python methods, then keeping the items of the partition asked and
sorting those again: a query of one ledger partition of the Runs table read every run, and a
due-index query of a 200-item Jobs table, as in the benchmark, took 6.3 ms in-process. The fix gives a
query of the table's own keys the items of its partition only, and a query of an index the table's
items unsorted (moto sorts what it keeps by the index's keys and then the table's, a total order, so
the answer is the same), and sorts the table for everything else (a scan) by the keys' plain values,
the same order since a key attribute has a single type: 1.7 ms for that due-index query. A query of
the table's own keys with a sort key ``BETWEEN`` two values of its type (the sweeper's and the listing's
reads of a job's runs, docs/decisions/0035) is handed only the partition's items in that range and the
nearest one outside it on each side (which decides moto's ``LastEvaluatedKey`` on a full page, so the
answer stays moto's): a per-second job's day of 86,400 runs took 770 ms a query, now 68 ms.
``tests/local/test_moto_fixes.py`` compares answers and refusals with moto's own for each.

:func:`apply` is idempotent.
"""

from __future__ import annotations

import base64
import functools
import json
import threading
from typing import Any

_APPLIED = "_jobsched_locked"
#: How long a long poll in moto waits between two scans of its queue when no message is sent meanwhile:
#: the most a delayed message that became visible waits for a poll already in flight.
LONG_POLL_RESCAN_SECONDS = 0.2
#: Receipt handles of deleted messages a queue remembers (the oldest are forgotten first).
KEEP_DELETED_HANDLES = 10_000
#: The header (sent by :mod:`jobsched.aws.clients`) naming the tenant a DynamoDB request is made for.
LANE_HEADER = "x-jobsched-lane"
_LANE_ENVIRON = "HTTP_" + LANE_HEADER.upper().replace("-", "_")  # the header as WSGI names it


#: Requests of one lane (tenant) moto's DynamoDB handles at once; the rest of that lane's wait.
LANE_CONCURRENCY = 4
_LANE_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_LANE_SLOTS_LOCK = threading.Lock()


def lane_slots(lane: str) -> threading.BoundedSemaphore:
    """The slots of ``lane`` (made on first use)."""
    with _LANE_SLOTS_LOCK:
        slots = _LANE_SLOTS.get(lane)
        if slots is None:
            slots = _LANE_SLOTS[lane] = threading.BoundedSemaphore(LANE_CONCURRENCY)
        return slots


#: The DynamoDB item operations of the emulator, one at a time (each is atomic on DynamoDB).
WRITE_LOCK = threading.RLock()
DYNAMODB_WRITES = ("put_item", "update_item", "delete_item", "batch_write_item", "transact_write_items")
DYNAMODB_READS = ("get_item", "query", "scan", "batch_get_item", "transact_get_items")
#: The DynamoDB operations whose answers are written out as JSON directly (no shape walk).
PLAIN_ANSWERS = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "GetItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "TransactGetItems",
    }
)


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
    """Patch moto's SQS ``Queue.delete_message`` to run under the queue's message lock and to keep a
    bounded record of deleted receipt handles, its sends and receives not to count the queue's
    messages, moto's DynamoDB item operations to run one at a time, a few requests per tenant, and to
    answer without walking their output shapes, to parse and check an update expression once, answer a
    query from its partition and sort a table's items by their plain key values, its items and
    messages not to be kept for its dashboard, and its long polls to look again every 0.2 s rather
    than every second (once)."""
    _atomic_dynamodb_writes()
    _requests_wait_in_their_lane()
    _sqs_delete_under_lock()
    _sqs_send_without_counting()
    _sqs_receive_without_counting()
    _models_untracked()
    _sqs_long_poll_rescans_sooner()
    _dynamodb_plain_answers()
    _dynamodb_update_expressions_once()
    _dynamodb_conditions_lexed_once()
    _dynamodb_sorts_by_native_keys()
    _responses_list_their_methods_once()


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


def _sqs_long_poll_rescans_sooner() -> None:
    from moto.sqs.models import Queue

    if getattr(Queue.wait_for_messages, _APPLIED, False):
        return
    original = Queue.wait_for_messages

    @functools.wraps(original)
    def wait_for_messages(self: Any, timeout: int) -> None:
        original(self, min(timeout, LONG_POLL_RESCAN_SECONDS))  # type: ignore[arg-type]  # a float works: it is a Condition timeout

    setattr(wait_for_messages, _APPLIED, True)
    Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]


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


def _atomic_dynamodb_writes() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    for name in DYNAMODB_WRITES + DYNAMODB_READS:
        original = getattr(DynamoDBBackend, name)
        if getattr(original, _APPLIED, False):
            continue

        def locked(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            with WRITE_LOCK:
                return _original(*args, **kwargs)

        functools.update_wrapper(locked, original)
        setattr(locked, _APPLIED, True)
        setattr(DynamoDBBackend, name, locked)


def _requests_wait_in_their_lane() -> None:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        lane = environ.get(_LANE_ENVIRON)
        if lane is None:  # not the embedded mode's clients: as moto
            return original(self, environ, start_response)
        with lane_slots(str(lane)):  # the whole request: its body read, served, its answer made
            return original(self, environ, start_response)

    setattr(__call__, _APPLIED, True)
    DomainDispatcherApplication.__call__ = __call__  # type: ignore[method-assign]


def _sqs_delete_under_lock() -> None:
    from moto.sqs.models import Queue

    original = Queue.delete_message
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def delete_message(self: Any, receipt_handle: str) -> None:
        with self._messages_lock:
            if not isinstance(self.deleted_messages, BoundedHandles):
                kept = BoundedHandles(KEEP_DELETED_HANDLES)
                kept.update(self.deleted_messages)
                self.deleted_messages = kept
            original(self, receipt_handle)

    setattr(delete_message, _APPLIED, True)
    Queue.delete_message = delete_message  # type: ignore[method-assign]


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


class _NotPlain(Exception):
    """The answer holds a value that only moto's serializer knows how to write (a timestamp, an object)."""


def _plain(value: Any) -> Any:
    """``value`` in its JSON wire form, as moto's JSON serializer writes it: ``None`` members dropped,
    bytes base64-encoded; raises :class:`_NotPlain` on anything else than JSON's own types."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise _NotPlain(type(value).__name__)


def _dynamodb_plain_answers() -> None:
    from moto.core.responses import ActionResult
    from moto.core.serialize import BaseJSONSerializer

    original = ActionResult.execute_result
    if getattr(original, _APPLIED, False):
        return

    def execute_result(self: Any, context: Any) -> Any:
        operation = context.operation_model
        if (
            operation.name in PLAIN_ANSWERS
            and operation.service_model.service_name == "dynamodb"
            and type(self).execute_result is execute_result  # not a subclass's own (paginated) answer
            and issubclass(context.serializer_class, BaseJSONSerializer)
            and isinstance(self.result, dict)
        ):
            try:
                body = json.dumps(_plain(self.result), separators=(",", ":"))
            except _NotPlain:
                return original(self, context)
            version = operation.service_model.metadata.get("jsonVersion", "1.0")
            headers = {"Content-Type": f"application/x-amz-json-{version}"}
            return operation.http.get("responseCode", 200), headers, body
        return original(self, context)

    setattr(execute_result, _APPLIED, True)
    execute_result.__wrapped__ = original  # type: ignore[attr-defined]  # the tests compare both
    ActionResult.execute_result = execute_result  # type: ignore[method-assign]


#: Distinct update expressions whose parse the emulator keeps (and texts, names and tables whose checks
#: passed); the oldest is forgotten first.
KEEP_PARSED_EXPRESSIONS = 512
#: The checks of an update expression that depend on nothing but its text, its attribute names and the
#: table's key attributes (moto's class names; the others read the item and the values, and always run).
TEXT_ONLY_CHECKS = ("ActionCountValidator", "OverlappingPathsValidator", "UpdateHashRangeKeyValidator")
_PARSED: dict[str, Any] = {}
_CHECKED: dict[tuple[Any, ...], None] = {}
_PARSED_LOCK = threading.Lock()
_SOURCE = "_jobsched_source"  # on a copy made from a kept parse: the expression it was parsed from
_BLOB = "_jobsched_blob"  # on a kept parse: its pickled form, which copies are made from


def _remember(kept: dict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``value`` under ``key``, forgetting the oldest past :data:`KEEP_PARSED_EXPRESSIONS` (call
    under ``_PARSED_LOCK``)."""
    kept[key] = value
    while len(kept) > KEEP_PARSED_EXPRESSIONS:
        del kept[next(iter(kept))]


def _dynamodb_update_expressions_once() -> None:
    import copy
    import pickle

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node  # type: ignore[attr-defined]
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    make = UpdateExpressionParser.__dict__["make"].__func__
    if getattr(make, _APPLIED, False):
        return

    @functools.wraps(make)
    def parsed_once(cls: Any, expression_str: str) -> Any:
        if cls is not UpdateExpressionParser or not isinstance(expression_str, str):
            return make(cls, expression_str)
        with _PARSED_LOCK:
            ast = _PARSED.get(expression_str)
        if ast is not None:
            return ast
        ast = make(cls, expression_str)  # a syntax error raises here, every time, as before
        setattr(ast, _SOURCE, expression_str)  # before the pickle: every copy names its text
        try:
            blob = pickle.dumps(ast, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # not picklable: copies are made by deepcopy, as moto does
            blob = None
        setattr(ast, _BLOB, blob)
        with _PARSED_LOCK:
            _remember(_PARSED, expression_str, ast)
        return ast

    def copied(node: Any, memo: Any = None) -> Any:
        blob = getattr(node, _BLOB, None)
        if blob is None:
            return copy.deepcopy(node, memo)
        return pickle.loads(blob)  # the same tree as deepcopy makes, several times faster

    def validate(self: Any) -> Any:
        node = self.node_to_validate
        source = getattr(node, _SOURCE, None)
        names = self.expression_attribute_names or {}
        key = None
        if source is not None and all(isinstance(name, str) for name in names.values()):
            key = (source, tuple(sorted(names.items())), tuple(self.table.table_key_attrs))
        checked = key is not None and key in _CHECKED
        text_checks = [p for p in self.processors if type(p).__name__ in TEXT_ONLY_CHECKS]
        for processor in self.processors:
            if checked and processor in text_checks:
                continue  # passed for this text, these names and this table's keys: it would again
            node = processor.traverse(node)
            if key is not None and not checked and text_checks and processor is text_checks[-1]:
                with _PARSED_LOCK:
                    _remember(_CHECKED, key, None)
        return node

    def found_once(self: Any, node_types: Any) -> Any:
        if self.__dict__.get(_BLOB) is None:  # not a kept parse (a copy may be changed): as moto
            return find_clauses(self, node_types)
        found = self.__dict__.setdefault("_jobsched_found", {})
        key = tuple(node_types)
        if key not in found:
            found[key] = find_clauses(self, node_types)
        return list(found[key])

    def processing_map(self: Any) -> Any:
        # Each pass's map from node class to its method is the same for the pass's life (moto builds
        # it anew for every node it visits, twice).
        kept = self.__dict__.get("_jobsched_map")
        if kept is None:
            kept = self.__dict__["_jobsched_map"] = self._processing_map()
        return kept

    def nodes_to_be_processed(self: Any) -> Any:
        kept = self.__dict__.get("_jobsched_types")
        if kept is None:
            kept = self.__dict__["_jobsched_types"] = tuple(processing_map(self))
        return kept

    def process(self: Any, node: Any) -> Any:
        for class_key, processor in processing_map(self).items():
            if isinstance(node, class_key):
                return processor(node)
        return None

    find_clauses = Node.find_clauses
    found_once.__wrapped__ = find_clauses  # type: ignore[attr-defined]  # moto's own, for the tests
    nodes_to_be_processed.__wrapped__ = DepthFirstTraverser.nodes_to_be_processed  # type: ignore[attr-defined]
    process.__wrapped__ = DepthFirstTraverser.process  # type: ignore[attr-defined]
    setattr(parsed_once, _APPLIED, True)
    UpdateExpressionParser.make = classmethod(parsed_once)
    validators.deepcopy = copied  # type: ignore[assignment]  # what Validator.__init__ copies its tree with
    UpdateExpressionValidator.validate = validate  # type: ignore[method-assign]
    Node.find_clauses = found_once
    DepthFirstTraverser.nodes_to_be_processed = nodes_to_be_processed
    DepthFirstTraverser.process = process


def _dynamodb_conditions_lexed_once() -> None:
    from collections import deque

    from moto.dynamodb.comparisons import ConditionExpressionParser

    original = ConditionExpressionParser._lex_condition_expression
    if getattr(original, _APPLIED, False):
        return
    lexed: dict[str, tuple[Any, ...]] = {}

    @functools.wraps(original)
    def lexed_once(self: Any) -> Any:
        text = self.condition_expression
        if not isinstance(text, str):
            return original(self)
        with _PARSED_LOCK:
            nodes = lexed.get(text)
        if nodes is None:
            # The tokens of the text alone (immutable named tuples, no children); names and values are
            # looked up by the parse that follows, at every call. A lexing error raises every time.
            nodes = tuple(original(self))
            with _PARSED_LOCK:
                _remember(lexed, text, nodes)
        return deque(nodes)

    setattr(lexed_once, _APPLIED, True)
    ConditionExpressionParser._lex_condition_expression = lexed_once  # type: ignore[method-assign]


def _native_key(item: Any) -> Any:
    """An item's place in moto's order of a table's items, as plain values: the same order (a key
    attribute has one type, so its ``DynamoType`` compares as its cast value), without a Python call
    per comparison."""
    if item.range_key:
        return (item.hash_key.cast_value, item.range_key.cast_value)
    return item.hash_key.cast_value


def _between(items: Any, low: Any, high: Any) -> list[Any]:
    """The items whose range key is from ``low`` to ``high``, and the nearest one outside on each side:
    moto ends a page that reached its limit with a ``LastEvaluatedKey`` when any item of the partition
    follows in the query's direction, in the range or not, so the nearest one keeps its answer."""
    kept: list[Any] = []
    below = above = None
    for item in items:
        value = item.range_key.cast_value
        if value < low:
            if below is None or value > below[0]:
                below = (value, item)
        elif value > high:
            if above is None or value < above[0]:
                above = (value, item)
        else:
            kept.append(item)
    return kept + [pair[1] for pair in (below, above) if pair is not None]


_QUERYING = threading.local()  # the query a table's all_items is called for: what it must hold


def _dynamodb_sorts_by_native_keys() -> None:
    import inspect

    from moto.dynamodb.models.table import Table

    original = Table.all_items
    if getattr(original, _APPLIED, False):
        return
    original_query = Table.query
    signature = inspect.signature(original_query)

    @functools.wraps(original)
    def all_items(self: Any) -> list[Any]:
        hint = getattr(_QUERYING, "hint", None)
        _QUERYING.hint = None  # for this call only
        if hint is not None and hint[0] is self and hint[1] is not None:  # a query of the table's own keys
            found = self.items.get(hint[1])
            if found is None:
                return []
            if not self.range_key_attr:
                return [found]
            if hint[2] is not None:  # BETWEEN on the range key: the items moto would keep, ...
                return _between(found.values(), *hint[2])
            return list(found.values())
        items: list[Any] = []
        for hash_set in self.items.values():
            if self.range_key_attr:
                items.extend(hash_set.values())
            else:
                items.append(hash_set)
        if hint is not None:  # a query of an index: it sorts what it keeps by the index's keys itself
            return items
        return sorted(items, key=_native_key)

    @functools.wraps(original_query)
    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked = signature.bind(self, *args, **kwargs).arguments
        # moto reads every item of the table (all_items) and keeps those of the partition asked; it
        # then sorts what it kept by the range key (or, for an index, by the index's keys and the
        # table's: a total order), so the partition alone, unsorted, gives the same answer.
        # A range key BETWEEN two values of its type (a string or a number, compared as DynamoDB does:
        # by code point, by value) keeps only the items between them, which moto then compares again:
        # what it keeps is the same, without a DynamoType comparison per item of a big partition.
        own = not asked.get("index_name")
        between = None
        objs = asked.get("range_objs") or []
        typed = len(objs) == 2 and objs[0].type == objs[1].type == getattr(self, "range_key_type", None)
        if own and asked.get("range_comparison") == "BETWEEN" and typed and objs[0].type in ("S", "N"):
            between = (objs[0].cast_value, objs[1].cast_value)
        _QUERYING.hint = (self, asked.get("hash_key") if own else None, between)
        try:
            return original_query(self, *args, **kwargs)
        finally:
            _QUERYING.hint = None

    setattr(all_items, _APPLIED, True)
    Table.all_items = all_items  # type: ignore[method-assign]
    Table.query = query  # type: ignore[method-assign]


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
