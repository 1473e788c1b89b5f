"""The tenant run feed: the key layout and the pure steps of writing and reading it.

A tenant's runs are listed newest first without a scan and without an index entry per run: before
run items are put, their entries (``tenant_sort`` strings, ``<run_key>#<job_id>``) are recorded in
*feed items* in the Runs table, one item per (tenant, hour bucket) per write batch
(docs/decisions/0004-tenant-run-feed.md)::

    job_id  = feed#<tenant>                  (job ids never contain '#': no run can share it)
    run_key = <hour bucket>#<nonce>          (bucket = first 11 chars of a run key: 20260329T01)
    runs    = [<run_key>#<job_id>, ...]      (all in that bucket)
    expires_at = the latest expiry of its runs (only when every run has one)

A feed item may name a run that was never created (a crash between the feed write and the puts) and
a run may be named twice (a re-tick after such a crash, a retried trigger): readers skip the first
(the run is not found) and dedupe the second. Nothing here touches AWS or reads the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

FEED_PREFIX = "feed#"
BUCKET_CHARS = 11  # "20260329T01": the hour of the scheduled instant
#: Split a feed item before it passes this estimated size (DynamoDB's item limit is 400 KB).
MAX_FEED_ITEM_BYTES = 350_000
#: Sorts after every nonce: ``<bucket>#\uffff`` bounds a bucket's feed items from above.
_AFTER_EVERY_NONCE = "\uffff"
_ITEM_OVERHEAD_BYTES = 200  # key and attribute names, the nonce, expires_at: generous


def feed_partition(tenant: str) -> str:
    """The partition key (``job_id`` attribute) of the tenant's feed items."""
    return FEED_PREFIX + tenant


def bucket_of(key: str) -> str:
    """The hour bucket of a run key, a ``tenant_sort`` entry or a feed item's sort key."""
    return key[:BUCKET_CHARS]


def bucket_upper_bound(entry: str) -> str:
    """A feed sort key above every feed item of ``entry``'s bucket and below the next bucket's."""
    return f"{bucket_of(entry)}#{_AFTER_EVERY_NONCE}"


def entry_key(entry: str) -> dict[str, str]:
    """The Runs table key a ``<run_key>#<job_id>`` entry names."""
    run_key, _, job_id = entry.partition("#")
    return {"job_id": job_id, "run_key": run_key}


@dataclass(frozen=True)
class FeedEntry:
    """One run as the feed records it: its tenant, its ``tenant_sort`` and its expiry (epoch s)."""

    tenant: str
    entry: str
    expires_at: int | None = None


def feed_items(entries: Iterable[FeedEntry], nonce: Callable[[], str]) -> list[dict[str, Any]]:
    """The feed items recording ``entries``: one per (tenant, bucket), split only past the size limit.

    Entries are written sorted newest first (readers do not rely on it: they merge a bucket's items).
    """
    groups: dict[tuple[str, str], list[FeedEntry]] = {}
    for e in entries:
        groups.setdefault((e.tenant, bucket_of(e.entry)), []).append(e)
    items: list[dict[str, Any]] = []
    for (tenant, bucket), group in sorted(groups.items()):
        for part in _split(sorted(group, key=lambda e: e.entry, reverse=True)):
            item: dict[str, Any] = {
                "job_id": feed_partition(tenant),
                "run_key": f"{bucket}#{nonce()}",
                "runs": [e.entry for e in part],
            }
            expiries = [e.expires_at for e in part]
            if all(x is not None for x in expiries):
                item["expires_at"] = max(x for x in expiries if x is not None)
            items.append(item)
    return items


def _split(group: list[FeedEntry]) -> list[list[FeedEntry]]:
    parts: list[list[FeedEntry]] = [[]]
    size = _ITEM_OVERHEAD_BYTES
    for e in group:
        grown = len(e.entry.encode()) + 1  # a list element costs its bytes plus one
        if parts[-1] and size + grown > MAX_FEED_ITEM_BYTES:
            parts.append([])
            size = _ITEM_OVERHEAD_BYTES
        parts[-1].append(e)
        size += grown
    return parts


def merge_bucket(items: Iterable[dict[str, Any]], before: str | None = None) -> list[str]:
    """A bucket's entries from all its feed items: deduplicated, those ``< before`` only, newest first."""
    merged = {e for item in items for e in item.get("runs", [])}
    if before is not None:
        merged = {e for e in merged if e < before}
    return sorted(merged, reverse=True)
