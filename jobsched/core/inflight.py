"""The in-flight ledger: the runs the sweeper watches, found through what is in flight, never through
the jobs or the runs' scheduled instants. Pure (docs/decisions/0014-in-flight-ledger.md).

Whenever runs enter ``queued`` — created by a dispatcher page, a trigger or a backfill, revived after
a pause, replayed or retried from the dead letters — *ledger items* name them, in the same
``BatchWriteItem`` that records them in their tenants' feeds (:mod:`jobsched.core.feed`): one per
write, or one per :data:`LEDGER_SPAN` of their due instants when the write's runs span longer and are
many (:func:`due_groups`)::

    job_id  = inflight#<p>                   (p = 0..PARTITIONS-1, from the nonce; '#': no job id)
    run_key = <written at, ISO>#<nonce>      (oldest first in a partition)
    runs    = [<run_key>#<job_id>, ...]      (the feed's entry format)
    due_from = the earliest due instant of its runs (ISO): none can be stranded before it
    tenants  = [<tenant>, ...]               (the tenants of its runs: a tenant's listing skips the rest)
    expires_at = the latest expiry of its runs (only when every run has one)

The sweeper reads every ledger item (a Query per partition), reads the runs it names, rescues or ends
the stranded ones, and deletes the item once none of its runs is active any more. So an item lives
about as long as its runs are in flight: the sweep's cost follows the runs in flight, an idle job
costs nothing, and a run is in reach whatever its scheduled instant and however long ago it was
created. Like the feed, an item may name a run that was never put (a crash between the ledger write
and the put); such an entry counts as settled once the item is older than the sweeper's grace.

Because an item names exactly what is (or was lately) in flight, the API lists runs by an active
state (queued, running, retrying) from it too (:func:`listed_entries`, docs/decisions/0021): no index
entry per run. A sweep that finds most of a big item's runs ended rewrites it with only the runs still
in flight (:func:`compacted`), so the ledger's size, and what a sweep or a listing reads, follows the
runs in flight even after a backfill of a thousand runs of which a few are still queued.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobsched.core.instants import from_iso, to_iso

LEDGER_PREFIX = "inflight#"
#: Ledger partitions: writes spread over them (by nonce), the sweeper queries each one.
PARTITIONS = 4
#: Split a ledger item before it passes this estimated size (DynamoDB's item limit is 400 KB).
MAX_LEDGER_ITEM_BYTES = 350_000
_ITEM_OVERHEAD_BYTES = 200
_ISO_CHARS = len("2026-03-29T01:45:00.000Z")


#: The runs of one write are named by one ledger item per span of this length of their due instants
#: (the sweeper's grace, 2 minutes): a sweep reads an item's runs once the earliest is due and keeps
#: reading all of them at every sweep until the last has ended, so one item for a per-minute job's 15
#: runs queued ahead (900 s) would be read at three or four sweeps; items of one span are read about
#: once (decision 0030).
LEDGER_SPAN = timedelta(minutes=2)
#: ... but a span is never closed with fewer runs than this in its item: an item costs a put and a
#: delete of at least 1 WRU each (written anyway, once per write), a run read 0.5 RRU (a tenth of a WRU
#: at list prices), so a small write (one job's runs) stays one item.
LEDGER_MIN_RUNS = 20


def due_groups(
    dues: Sequence[datetime], span: timedelta = LEDGER_SPAN, min_runs: int = LEDGER_MIN_RUNS
) -> list[list[int]]:
    """Indices of ``dues`` grouped into ledger items: by due instant, a new group once the current one
    spans ``span`` and holds at least ``min_runs``; a last group smaller than ``min_runs`` joins the
    one before it. Every index is in exactly one group; none for no dues."""
    order = sorted(range(len(dues)), key=lambda i: dues[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and (dues[i] - dues[groups[-1][0]] < span or len(groups[-1]) < min_runs):
            groups[-1].append(i)
        else:
            groups.append([i])
    if len(groups) > 1 and len(groups[-1]) < min_runs:
        groups[-2].extend(groups.pop())
    return groups


def ledger_partition(index: int) -> str:
    """The partition key (``job_id`` attribute) of ledger partition ``index``."""
    return f"{LEDGER_PREFIX}{index}"


def partitions() -> list[str]:
    return [ledger_partition(i) for i in range(PARTITIONS)]


def unripe(item: dict[str, Any], limit: datetime) -> bool:
    """Whether none of a ledger item's runs can be stranded yet: its earliest run is due after
    ``limit`` (now - grace); such an item is kept without reading its runs."""
    return "due_from" in item and from_iso(item["due_from"]) > limit


def written_at(sort_key: str) -> datetime:
    """When a ledger item was written, from its sort key."""
    return from_iso(sort_key[:_ISO_CHARS])


def ledger_items(
    entries: Iterable[str],
    at: datetime,
    nonce: Callable[[], str],
    expires_at: int | None = None,
    due_from: datetime | None = None,
    tenants: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """The ledger items naming ``entries`` (``<run_key>#<job_id>``) written at ``at``, the earliest of
    whose runs is due at ``due_from`` (default ``at``), of ``tenants``: one, split only past the size
    limit; none for no entries."""
    tenant_list = sorted(set(tenants))
    parts: list[list[str]] = []
    size = _ITEM_OVERHEAD_BYTES
    for entry in sorted(set(entries)):
        grown = len(entry.encode()) + 1
        if not parts or size + grown > MAX_LEDGER_ITEM_BYTES:
            parts.append([])
            size = _ITEM_OVERHEAD_BYTES
        parts[-1].append(entry)
        size += grown
    items = []
    for part in parts:
        tag = nonce()
        item: dict[str, Any] = {
            "job_id": ledger_partition(zlib.crc32(tag.encode()) % PARTITIONS),
            "run_key": f"{to_iso(at)}#{tag}",
            "runs": part,
            "due_from": to_iso(due_from or at),
        }
        if tenant_list:
            item["tenants"] = tenant_list
        if expires_at is not None:
            item["expires_at"] = expires_at
        items.append(item)
    return items


def names_tenant(item: dict[str, Any], tenant: str) -> bool:
    """Whether a ledger item may name runs of ``tenant`` (an item written before items carried their
    ``tenants`` may name anyone's)."""
    return "tenants" not in item or tenant in item["tenants"]


def listed_entries(
    items: Iterable[dict[str, Any]],
    tenant: str,
    *,
    job_id: str | None = None,
    since_key: str | None = None,
    before: str | None = None,
) -> list[str]:
    """The entries (``<run_key>#<job_id>``) of ledger ``items`` a listing of ``tenant``'s runs in flight
    examines, newest scheduled first, each once: only items that may name the tenant's runs, only
    ``job_id``'s runs when given, run keys at or after ``since_key``, entries before ``before`` (the
    cursor: the last entry a previous page examined). Which of them are still in flight, and the
    tenant's, only the runs themselves say."""
    out: set[str] = set()
    for item in items:
        if not names_tenant(item, tenant):
            continue
        for entry in item.get("runs", []):
            run_key, _, of_job = entry.partition("#")
            if job_id is not None and of_job != job_id:
                continue
            if since_key is not None and run_key < since_key:
                continue
            if before is not None and entry >= before:
                continue
            out.add(entry)
    return sorted(out, reverse=True)


#: A ledger item is rewritten with only its runs still in flight when it names at least this many runs
#: and at most this fraction of them is in flight (:func:`compacted`).
COMPACT_MIN_RUNS = 50
COMPACT_MAX_FRACTION = 0.25


def compacted(
    item: dict[str, Any], in_flight: Iterable[str], tenants: Iterable[str], nonce: Callable[[], str]
) -> dict[str, Any] | None:
    """The ledger item replacing ``item`` when only ``in_flight`` (some of its entries) are still in
    flight, or None when rewriting it is not worth its write: it names fewer than
    :data:`COMPACT_MIN_RUNS` runs, more than :data:`COMPACT_MAX_FRACTION` of them are in flight, or none
    is (then the item is simply deleted). Same partition, written-at, ``due_from`` and expiry; a fresh
    nonce; ``tenants`` those of the runs kept.

    Cost: the new item's size in WRU, once (the old item's delete is paid anyway, when it settles);
    each later sweep and listing then reads the small item and its few runs instead of every run the
    big one named (0.5 RRU each)."""
    runs = item.get("runs", [])
    kept = sorted(set(in_flight) & set(runs))
    if not kept or len(runs) < COMPACT_MIN_RUNS or len(kept) > COMPACT_MAX_FRACTION * len(runs):
        return None
    out = {
        **item,
        "run_key": f"{item['run_key'][:_ISO_CHARS]}#{nonce()}",
        "runs": kept,
    }
    tenant_list = sorted(set(tenants))
    if tenant_list:
        out["tenants"] = tenant_list
    else:
        out.pop("tenants", None)
    return out
