"""The in-flight ledger: the runs the sweeper watches, found through what is in flight, never through
the jobs or the runs' scheduled instants. Pure (docs/decisions/0014-in-flight-ledger.md).

Whenever runs enter ``queued`` — created by a dispatcher page, a trigger or a backfill, revived after
a pause, replayed or retried from the dead letters — one *ledger item* per write batch names them, in
the same ``BatchWriteItem`` that records them in their tenants' feeds (:mod:`jobsched.core.feed`)::

    job_id  = inflight#<p>                   (p = 0..PARTITIONS-1, from the nonce; '#': no job id)
    run_key = <written at, ISO>#<nonce>      (oldest first in a partition)
    runs    = [<run_key>#<job_id>, ...]      (the feed's entry format)
    due_from = the earliest due instant of its runs (ISO): none can be stranded before it
    expires_at = the latest expiry of its runs (only when every run has one)

The sweeper reads every ledger item (a Query per partition), reads the runs it names, rescues or ends
the stranded ones, and deletes the item once none of its runs is active any more. So an item lives
about as long as its runs are in flight: the sweep's cost follows the runs in flight, an idle job
costs nothing, and a run is in reach whatever its scheduled instant and however long ago it was
created. Like the feed, an item may name a run that was never put (a crash between the ledger write
and the put); such an entry counts as settled once the item is older than the sweeper's grace.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from jobsched.core.instants import from_iso, to_iso

LEDGER_PREFIX = "inflight#"
#: Ledger partitions: writes spread over them (by nonce), the sweeper queries each one.
PARTITIONS = 4
#: Split a ledger item before it passes this estimated size (DynamoDB's item limit is 400 KB).
MAX_LEDGER_ITEM_BYTES = 350_000
_ITEM_OVERHEAD_BYTES = 200
_ISO_CHARS = len("2026-03-29T01:45:00.000Z")


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
) -> list[dict[str, Any]]:
    """The ledger items naming ``entries`` (``<run_key>#<job_id>``) written at ``at``, the earliest of
    whose runs is due at ``due_from`` (default ``at``): one, split only past the size limit; none for
    no entries."""
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
        if expires_at is not None:
            item["expires_at"] = expires_at
        items.append(item)
    return items
