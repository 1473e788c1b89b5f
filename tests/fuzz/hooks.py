"""Schemathesis hooks (``SCHEMATHESIS_HOOKS=tests.fuzz.hooks``): generators for the formats the
OpenAPI document names and JSON Schema cannot spell (:mod:`jobsched.api.contract`), and the
cross-field rules the document states in words.

Each generator draws only values the API's own rules accept (``tests/fuzz/test_hooks.py`` checks
that against the core's parser); the filters drop a drawn case that breaks a stated cross-field rule,
and :func:`wire_graph` makes a positive case's workflow nodes a graph (unique ids, parents listed
earlier), which the document states in words only.
Decision 0025 says why these are the only help the fuzzer gets.
"""

from __future__ import annotations

import re
import uuid
import zlib
from datetime import UTC, date, datetime, timedelta
from typing import Any

import schemathesis
from hypothesis import strategies as st

from jobsched.api.contract import HTTP_URL_FORMAT, IDEMPOTENCY_KEY_PATTERN, SCHEDULE_FORMAT
from jobsched.runtime.resources import LAMBDA_TIME_LIMIT_SECONDS as LAMBDA_LIMIT
from jobsched.runtime.resources import MAX_CONTAINER_TIMEOUT_SECONDS

#: A backfill window the fuzzer draws is at most this long: with a schedule of at most one
#: occurrence a second, that stays under the 1000 occurrences one call may create.
MAX_BACKFILL_WINDOW = timedelta(seconds=900)


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high).map(str)
    span = st.tuples(st.integers(low, high), st.integers(low, high)).map(lambda p: f"{min(p)}-{max(p)}")
    step = st.integers(1, max(1, (high - low) // 2)).map(lambda n: f"*/{n}")
    return st.one_of(st.just("*"), number, span, step)


_unix = st.tuples(_field(0, 59), _field(0, 23), _field(1, 28), _field(1, 12), _field(0, 6)).map(" ".join)
_with_seconds = st.tuples(_field(0, 59), _unix).map(" ".join)
_macro = st.sampled_from(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"])
_rate = st.tuples(st.integers(1, 1000), st.sampled_from(["seconds", "minutes", "hours", "days"])).map(
    lambda p: f"rate({p[0]} {p[1] if p[0] != 1 else p[1][:-1]})"
)
_aws = st.tuples(
    _field(0, 59),
    _field(0, 23),
    st.booleans(),
    _field(1, 28),
    _field(1, 12),
    st.sampled_from(["*", "2030-2099"]),
).map(lambda p: f"cron({p[0]} {p[1]} {p[3] if p[2] else '?'} {p[4]} {'?' if p[2] else '*'} {p[5]})")
_at = st.datetimes(min_value=datetime(2030, 1, 1), max_value=datetime(2099, 12, 31)).map(
    lambda d: f"at({d.replace(microsecond=0).isoformat()})"
)
SCHEDULES = st.one_of(_unix, _with_seconds, _macro, _rate, _aws, _at)

_label = st.from_regex(r"\A[a-z][a-z0-9-]{0,20}[a-z0-9]\Z")
_path = st.lists(st.from_regex(r"\A[A-Za-z0-9._~-]{1,12}\Z"), max_size=3).map(lambda parts: "/".join(parts))
HTTP_URLS = st.tuples(st.sampled_from(["http", "https"]), _label, _path).map(
    lambda p: f"{p[0]}://{p[1]}.example/{p[2]}"
)

schemathesis.openapi.format(SCHEDULE_FORMAT, SCHEDULES)
schemathesis.openapi.format(HTTP_URL_FORMAT, HTTP_URLS)


def _instant(value: Any) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _retry_ordered(retry: Any) -> bool:
    if not isinstance(retry, dict):
        return True
    base, cap = retry.get("base_seconds", 2.0), retry.get("max_seconds", 300.0)
    return not (isinstance(base, int | float) and isinstance(cap, int | float) and base > cap)


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _keeps_pool_limits(obj: dict[str, Any], *, patch: bool = False) -> bool:
    """False for a job or node whose timeouts are beyond its pool's limit, as ``pool``'s description
    states: at most 900 s (Lambda's limit) on ``lambda`` and ``long``, 43200 s on ``container``; with
    no pool, a timeout over 900 s chooses ``container``. A PATCH does not know the stored job's pool
    or timeout, so a timeout over 900 s is kept only beside ``"pool": "container"``, and a Lambda pool
    only beside a timeout (the stored one may be over the limit)."""
    pool = obj.get("pool")
    target = obj.get("target")
    http = target.get("http") if isinstance(target, dict) else None
    timeouts = [
        t for t in (_seconds(obj.get("timeout_seconds")), _seconds((http or {}).get("timeout_seconds"))) if t
    ]
    if patch:
        if pool != "container" and any(t > LAMBDA_LIMIT for t in timeouts):
            return False
        return not (pool in ("lambda", "long") and _seconds(obj.get("timeout_seconds")) is None)
    if pool is None:
        own = _seconds(obj.get("timeout_seconds"))
        pool = "container" if own is not None and own > LAMBDA_LIMIT else "lambda"
    limit = MAX_CONTAINER_TIMEOUT_SECONDS if pool == "container" else LAMBDA_LIMIT
    return all(t <= limit for t in timeouts)


def keeps_cross_field_rules(body: Any, *, patch: bool = False) -> bool:
    """False for a body that breaks a rule the document states in a description (``patch``: the body
    of a PATCH, which changes a stored object the fuzzer cannot see)."""
    if not isinstance(body, dict):
        return True
    if not _retry_ordered(body.get("retry")):
        return False
    if not _keeps_pool_limits(body, patch=patch):
        return False
    nodes = body.get("nodes")
    nodes = [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []
    if not all(_retry_ordered(node.get("retry")) and _keeps_pool_limits(node) for node in nodes):
        return False
    if "from" in body and "to" in body:
        start, end = _instant(body["from"]), _instant(body["to"])
        if start is not None and end is not None and not timedelta(0) <= end - start <= MAX_BACKFILL_WINDOW:
            return False
    return True


#: A workflow has at most this many edges (the document says so in ``depends_on``'s description).
MAX_EDGES = 500
#: GET /usage answers at most this many days (``from`` and ``to``'s description).
MAX_USAGE_DAYS = 31


def _day(value: Any) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def keeps_usage_window(query: Any, today: date) -> bool:
    """False for a ``GET /usage`` query whose window (``from`` defaults to 6 days before ``to``,
    ``to`` to today) is reversed or longer than 31 days, as the parameters' descriptions state."""
    query = query if isinstance(query, dict) else {}
    last = _day(query.get("to")) or today
    first = _day(query.get("from"))
    if first is None:
        return True
    return first <= last and (last - first).days < MAX_USAGE_DAYS


#: GET /stats: the default span before ``to`` per bucket, and the limits its parameters' descriptions state.
STATS_SPANS = {"minute": timedelta(hours=1), "hour": timedelta(days=1), "day": timedelta(days=7)}
STATS_MAX_SPAN = timedelta(days=7)
STATS_MAX_BUCKETS = 1440
STATS_YEARS = (1970, 9998)


def keeps_stats_window(query: Any, now: datetime) -> bool:
    """False for a ``GET /stats`` query whose range breaks what ``from``, ``to`` and ``bucket`` state:
    both in the years 1970-9998 (``to`` defaults to now, ``from`` to ``to`` less the bucket's span),
    ``from`` before ``to`` and at most 7 days before it, at most 1440 buckets."""
    query = query if isinstance(query, dict) else {}
    bucket = query.get("bucket", "minute")
    if bucket not in STATS_SPANS:
        return True  # the schema's enum: a negative case's business
    end = _instant(query["to"]) if "to" in query else now
    if end is None:
        return True
    try:
        start = _instant(query["from"]) if "from" in query else end - STATS_SPANS[bucket]
    except OverflowError:
        return False
    if start is None:
        return True
    first, last = STATS_YEARS
    if not all(first <= t.astimezone(UTC).year <= last for t in (start, end)):
        return False
    if not timedelta(0) < end - start <= STATS_MAX_SPAN:
        return False
    width = {"minute": 60, "hour": 3600, "day": 86400}[bucket]
    return (end - start).total_seconds() / width <= STATS_MAX_BUCKETS - 2  # whole buckets, both ends


def wire_graph(nodes: Any) -> None:
    """Make a drawn node list a workflow graph, as ``depends_on``'s description asks: node ids are made
    unique (a repeated one becomes ``n<index>``), and each drawn parent is mapped onto a node listed
    earlier (so the graph has no cycle; the mapping is a checksum of the drawn string, so a seed
    replays), each once, at most 500 edges in all."""
    if not isinstance(nodes, list):
        return
    earlier: list[str] = []
    edges = 0
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            continue
        node_id = node.get("id")
        if isinstance(node_id, str) and node_id in earlier:
            node_id = f"n{index}"
            while node_id in earlier or any(isinstance(n, dict) and n.get("id") == node_id for n in nodes):
                node_id += "_"
            node["id"] = node_id
        parents = node.get("depends_on")
        if isinstance(parents, list):
            mapped = [earlier[zlib.crc32(str(p).encode()) % len(earlier)] for p in parents] if earlier else []
            kept = list(dict.fromkeys(mapped))[: max(0, MAX_EDGES - edges)]
            node["depends_on"] = kept
            edges += len(kept)
        if isinstance(node_id, str):
            earlier.append(node_id)


_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


@schemathesis.hook
def map_case(ctx: Any, case: Any) -> Any:
    """A valid ``Idempotency-Key`` is made unique per request: a key is by design refused (422
    ``idempotency_key_reused``) when it comes back with another body, which no schema can say."""
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "idempotency-key" and isinstance(headers[name], str) and _KEY.match(headers[name]):
            headers[name] = f"fuzz-{uuid.uuid4().hex}"
    if _positive(case) and isinstance(case.body, dict):
        wire_graph(case.body.get("nodes"))
    return case


def _positive(case: Any) -> bool:
    mode = getattr(getattr(getattr(case, "meta", None), "generation", None), "mode", None)
    return str(getattr(mode, "value", mode)) == "positive"


def is_schedule(value: Any) -> bool:
    """Whether ``value`` is of the ``jobsched-schedule`` format (parses, and fires after now)."""
    from jobsched.core.dispatch_plan import first_fire_after
    from jobsched.core.errors import ValidationError
    from jobsched.core.schedules import parse_schedule

    try:
        return first_fire_after(parse_schedule(value, "UTC"), datetime.now(UTC)) is not None
    except (ValidationError, TypeError, ValueError):
        return False


def keeps_formats(case: Any) -> bool:
    """False for a positive case whose schedule is not of its format: the coverage phase draws
    strings without the registered format generators (``0`` for a schedule)."""
    if not _positive(case):
        return True
    for container in (case.body, case.query):
        schedule = container.get("schedule") if isinstance(container, dict) else None
        if isinstance(schedule, str) and not is_schedule(schedule):
            return False
    return True


@schemathesis.hook
def filter_case(ctx: Any, case: Any) -> bool:
    """Applied in every phase (``filter_body`` is not applied to the coverage phase's cases)."""
    usage = _positive(case) and case.path == "/usage"
    if usage and not keeps_usage_window(case.query, datetime.now(UTC).date()):
        return False
    if _positive(case) and case.path == "/stats" and not keeps_stats_window(case.query, datetime.now(UTC)):
        return False
    patch = str(getattr(case, "method", "")).upper() == "PATCH"
    return keeps_cross_field_rules(case.body, patch=patch) and keeps_formats(case)
