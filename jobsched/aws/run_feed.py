"""The tenant run feed in the Runs table: record runs before they are put, read a tenant's runs back.

Layout, crash semantics and cost: :mod:`jobsched.core.feed` and docs/decisions/0004-tenant-run-feed.md.
Writing is one BatchWriteItem per 25 feed items (a dispatcher page usually needs one item per tenant
and hour); reading queries the tenant's feed partition newest bucket first, one bounded page at a
time, and yields each bucket's entries once all of its items are read.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jobsched.core.feed import (
    FeedEntry,
    bucket_of,
    bucket_upper_bound,
    feed_items,
    feed_partition,
    merge_bucket,
)
from jobsched.core.models import Run, tenant_sort_for
from jobsched.ports.tables import Table

#: Feed items per Query page (a page also stops at 1 MB): bounds one read, not the listing.
QUERY_PAGE = 100


def feed_entry(run: Run) -> FeedEntry:
    return FeedEntry(run.tenant, tenant_sort_for(run.run_key, run.job_id), run.expires_at)


class RunFeed:
    """Feed items of the Runs table (metered client and table name injected)."""

    def __init__(
        self, dynamo: Table, table: str, *, nonce: Callable[[], str] = lambda: secrets.token_urlsafe(8)
    ):
        self.dynamo = dynamo
        self.table = table
        self.nonce = nonce

    def record(self, runs: Iterable[Run]) -> int:
        """Record ``runs`` in their tenants' feeds; returns the number of feed items written."""
        return self.record_entries(feed_entry(r) for r in runs)

    def record_entries(self, entries: Iterable[FeedEntry]) -> int:
        items = feed_items(entries, self.nonce)
        if items:
            self.dynamo.batch_write(self.table, items)
        return len(items)

    def buckets(self, tenant: str, before: str | None = None) -> Iterator[list[str]]:
        """The tenant's entries, one list per hour bucket, newest bucket first; each list deduplicated,
        newest first, and holding only entries ``< before`` when given. Lazy: a caller that stops
        early reads no further page."""
        condition, values = "job_id = :p", {":p": feed_partition(tenant)}
        if before is not None:
            condition += " AND run_key < :hi"
            values[":hi"] = bucket_upper_bound(before)
        current: str | None = None
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        while True:
            page, start = self.dynamo.query(
                self.table, condition, values, limit=QUERY_PAGE, forward=False, start_key=start
            )
            for item in page:
                bucket = bucket_of(item["run_key"])
                if current is not None and bucket != current:
                    yield merge_bucket(items, before)
                    items = []
                current = bucket
                items.append(item)
            if start is None:
                break
        if items:
            yield merge_bucket(items, before)
