"""Patches that only make moto's DynamoDB fast enough for the embedded mode and the benchmarks: each
answers exactly what moto answers (``tests/local/test_moto_fixes.py`` compares answers and refusals
with moto's own), in less time. None is a moto bug in behaviour; each is moto doing work its answer
does not need.

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

**Every update re-parsed and re-checked its expression.** moto parses an ``UpdateItem``'s update
expression twice per request (once to list the names and values it uses, once to apply it),
deep-copies the tree, then runs ten passes over the copy, three of which depend on nothing but the
text, its attribute names and the table's key attributes (too many clauses, overlapping paths, a key
attribute updated); and it tokenizes a condition expression twice. Profiled in the cost benchmark,
56 % of the worker's time on the CPU went there; a run's claim (an ``UpdateItem`` of six attributes
under a condition) took 7.0 ms in-process, a ``GetItem`` 1 ms. The fix keeps the parse of each
distinct text (:data:`KEEP_PARSED_EXPRESSIONS`; the tree is only ever read, the validation works on a
copy), makes each copy from the tree's pickle, skips the three text-only passes for a text, names and
table they passed before (a refusal is never remembered: a refused text is checked again, and refused
again), keeps what the kept tree's ``find_clauses`` found (the tree never changes; copies are searched
as moto does), lets each pass build its map from node class to method once rather than twice per node
visited, and keeps the tokens of each condition text (immutable; names and values are still looked up
at every request): 2.9 ms per claim.

**Every query of an index sorted the whole table in Python.** moto answers every ``Query`` by sorting
every item of the table (``Table.all_items``), comparing ``DynamoType`` objects through Python
methods, then keeping the items of the partition asked and sorting those again: a query of one ledger
partition of the Runs table read every run, and a due-index query of a 200-item Jobs table, as in the
benchmark, took 6.3 ms in-process. The fix gives a query of the table's own keys the items of its
partition only, and a query of an index the table's items unsorted (moto sorts what it keeps by the
index's keys and then the table's, a total order, so the answer is the same), and sorts the table for
everything else (a scan) by the keys' plain values, the same order since a key attribute has a single
type: 1.7 ms for that due-index query. A query of the table's own keys with a sort key ``BETWEEN`` two
values of its type (the sweeper's and the listing's reads of a job's runs, docs/decisions/0035) is
handed only the partition's items in that range and the nearest one outside it on each side (which
decides moto's ``LastEvaluatedKey`` on a full page, so the answer stays moto's): a per-second job's day
of 86,400 runs took 770 ms a query, now 68 ms.
"""

from __future__ import annotations

import base64
import functools
import json
import threading
from typing import Any

_APPLIED = "_jobsched_speed_dynamodb"  # on a patched method: this module's patch is in place
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


def apply() -> None:
    """Patch moto's DynamoDB to answer its item operations without walking their output shapes, to
    parse and check an update expression once, to lex a condition once, to answer a query from its
    partition, to sort a table's items by their plain key values, and its server to answer DynamoDB's
    requests without Flask's request handling (once)."""
    _dynamodb_plain_answers()
    _dynamodb_update_expressions_once()
    _dynamodb_conditions_lexed_once()
    _dynamodb_sorts_by_native_keys()
    _dynamodb_served_without_flask()


class DirectDynamoDB:
    """moto's DynamoDB application (a Flask app) with its requests answered without Flask's request
    handling: a ``POST /`` with no ``Origin`` header (every request of the AWS SDK) goes to the view
    Flask would route it to, ``DynamoHandler.dispatch``, with what ``convert_to_flask_response`` does
    around it (the request normalized and recorded, a ``ClientError`` answered 400 with its message),
    and the answer gets the one header Flask adds to it, flask-cors's ``Access-Control-Allow-Origin:
    *``; an ``HTTPException`` raised on the way is answered as Flask answers it (the exception's own
    answer, that header added). Anything else (another method or path, a browser's request with an
    ``Origin``, which flask-cors answers otherwise) goes to the Flask app itself. About 15 % of the
    server's CPU for an empty ``Query`` was Flask's (decision 0044, twenty-fourth pass);
    ``tests/local/test_moto_fixes.py`` compares the answers with Flask's."""

    def __init__(self, app: Any):
        # Imported here, once per server: this module is imported where moto is not (the embedded
        # mode's own process), and a request should not pay for import statements.
        from botocore.exceptions import ClientError
        from moto.core.request import normalize_request
        from moto.dynamodb.responses import DynamoHandler
        from moto.moto_api import recorder
        from werkzeug.exceptions import HTTPException

        self.app = app
        self._client_error, self._http_exception = ClientError, HTTPException
        self._normalize, self._record, self._dispatch = (
            normalize_request,
            recorder._record_request,
            DynamoHandler.dispatch,
        )

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if (
            environ.get("REQUEST_METHOD") != "POST"
            or environ.get("PATH_INFO") != "/"
            or "HTTP_ORIGIN" in environ
        ):
            return self.app(environ, start_response)
        response_class = self.app.response_class
        try:
            request = self._normalize(self.app.request_class(environ))
            self._record(request)
            try:
                result = self._dispatch(request, request.raw_url, dict(request.headers))
            except self._client_error as exc:
                result = 400, {}, exc.response["Error"]["Message"]
            status, headers, content = result if len(result) == 3 else (200, {}, result)
            response = response_class(response=content, status=status, headers=headers)
        except self._http_exception as exc:
            response = response_class.force_type(exc, environ)
        response.headers["Access-Control-Allow-Origin"] = "*"
        return response(environ, start_response)


def _dynamodb_served_without_flask() -> None:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.get_application
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def get_application(self: Any, environ: dict[str, Any]) -> Any:
        app = original(self, environ)
        if getattr(app, "service", None) != "dynamodb":
            return app
        direct = app.__dict__.get("_jobsched_direct")
        if direct is None:
            direct = app.__dict__["_jobsched_direct"] = DirectDynamoDB(app)
        return direct

    setattr(get_application, _APPLIED, True)
    DomainDispatcherApplication.get_application = get_application  # type: ignore[method-assign]


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
