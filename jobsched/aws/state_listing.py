"""Listing a tenant's runs by state at a cost that follows what is listed, not the history
(docs/decisions/0021-listing-by-state.md).

- **queued, running, retrying** (the active states): exactly the runs the in-flight ledger names
  (:mod:`jobsched.core.inflight`, decision 0014), whose items are written in the same BatchWriteItem
  as the run feed. A page queries the ledger's partitions (its size follows the runs in flight of
  every tenant: about 60 bytes a run, 0.5 RRU per 4 KB), keeps the entries of items naming the tenant
  (and of ``job_id``, scheduled at or after ``since``), newest scheduled first, and reads those runs
  100 at a time, keeping the ones in the state asked: grouped by job (:func:`read_runs`, decision
  0035), a job's runs that lie next to each other with one Query billed by their total size (0.5 RRU
  per 4 KB: about eight runs), a lone run by key (0.5 RRU).
- **failed**: the sparse ``dead_letter_index`` (only dead letters carry its keys), newest dead-lettered
  first; a run in a replay (back to ``queued``, still keyed there) and a discarded one (off the index)
  are not listed. Its items are projected whole: no second read.

Either way at most ``budget`` runs are examined for a page (the :data:`MAX_EXAMINED` of
:mod:`jobsched.core.paging`), so a page may come back short with a cursor.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jobsched.aws.run_reads import read_runs
from jobsched.core.feed import entry_key
from jobsched.core.inflight import listed_entries, partitions
from jobsched.core.models import ACTIVE_RUN_STATES, Run, RunState, run_key_for, tenant_sort_for
from jobsched.core.paging import MAX_EXAMINED, filtered_page
from jobsched.ports.tables import Table

DEAD_LETTER_INDEX = "dead_letter_index"
#: Runs read per round of an in-flight listing (a BatchGetItem's own limit is 100).
_CHUNK = 100


class StateListing:
    """Pages of a tenant's runs in one state (metered client and Runs table name injected)."""

    def __init__(self, dynamo: Table, table: str, *, budget: int = MAX_EXAMINED):
        self.dynamo = dynamo
        self.table = table
        self.budget = budget

    def in_flight(
        self,
        tenant: str,
        state: RunState,
        *,
        limit: int,
        after: str | None = None,
        job_id: str | None = None,
        since: datetime | None = None,
    ) -> tuple[list[Run], str | None]:
        """A page of the tenant's ``state`` runs (an active state), newest scheduled first; the cursor
        is the last entry examined (``<run_key>#<job_id>``), None when the list ended."""
        if state not in ACTIVE_RUN_STATES:
            raise ValueError(f"{state} runs are not in the in-flight ledger")
        ledger = [
            item
            for partition in partitions()
            for item in self.dynamo.query_all(self.table, "job_id = :p", {":p": partition})
        ]
        entries = listed_entries(
            ledger,
            tenant,
            job_id=job_id,
            since_key=run_key_for(since) if since is not None else None,
            before=after,
        )
        position = {entry: i for i, entry in enumerate(entries)}

        def fetch(n: int, last: str | None) -> tuple[list[Run], str | None]:
            start = 0 if last is None else position[last] + 1
            chunk = entries[start : start + max(n, _CHUNK)]
            if not chunk:
                return [], None
            items = read_runs(self.dynamo, self.table, map(entry_key, chunk))
            by_entry = {tenant_sort_for(run_key, job_id): i for (job_id, run_key), i in items.items()}
            runs = [Run.from_item(by_entry[e]) for e in chunk if e in by_entry]
            more = start + len(chunk) < len(entries)
            return runs, (chunk[-1] if more else None)

        def keep(run: Run) -> bool:
            return run.tenant == tenant and run.state is state

        # ``entries`` already start after the cursor: the page starts at their beginning.
        return filtered_page(
            fetch,
            lambda r: tenant_sort_for(r.run_key, r.job_id),
            keep,
            limit=limit,
            start_after=None,
            max_examined=self.budget,
        )

    def failed(
        self,
        tenant: str,
        *,
        limit: int,
        after: dict[str, Any] | None = None,
        job_id: str | None = None,
        since: datetime | None = None,
    ) -> tuple[list[Run], dict[str, Any] | None]:
        """A page of the tenant's failed runs (its dead letters), newest dead-lettered first; the
        cursor is the index key of the last item examined, None when the list ended."""
        filters = ["#state = :failed"]
        values: dict[str, Any] = {":t": tenant, ":failed": str(RunState.FAILED)}
        if job_id is not None:
            filters.append("job_id = :j")
            values[":j"] = job_id
        if since is not None:
            filters.append("run_key >= :k")
            values[":k"] = run_key_for(since)

        def fetch(n: int, last: dict[str, Any] | None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
            return self.dynamo.query(
                self.table,
                "dl_tenant = :t",
                values,
                names={"#state": "state"},
                index=DEAD_LETTER_INDEX,
                limit=n,
                forward=False,
                start_key=last,
                filter_expression=" AND ".join(filters),
            )

        items, last = filtered_page(
            fetch,
            lambda i: {k: i[k] for k in ("dl_tenant", "dl_at", "job_id", "run_key")},
            lambda i: i.get("tenant") == tenant and i.get("state") == str(RunState.FAILED),
            limit=limit,
            start_after=after,
            max_examined=self.budget,
        )
        return [Run.from_item(i) for i in items], last
