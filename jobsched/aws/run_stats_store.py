"""Run statistics items per tenant and minute in the Runs table (decision 0061)::

    job_id  = stats#<tenant>        (job ids never contain '#': no run can share it)
    run_key = <YYYYMMDDTHHMM>       (the UTC minute of the runs' due instants)
    succeeded, failed, cancelled, skipped, dead_lettered, lag_b0..lag_b11   (counters, ADD)
    dead_letters                    (the runs dead-lettered in this minute, by dl_at: decision 0064)
    expires_at = the minute + the retention (the table's TTL)

:meth:`RunStatsStore.add` is one ``UpdateItem`` of ``ADD`` counters per (tenant, minute) of a sweep's
settled runs: adding is commutative, so sweeps never lose each other's counts. :meth:`minutes` reads a
tenant's range with one ``Query`` (eventually consistent, paged at 1 MB) on the key range: one item per
minute that had runs, about 150 bytes each, whatever the number of runs in it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from jobsched.core.run_stats import COUNTERS, StatsRange, minute_of
from jobsched.ports.tables import Table

PREFIX = "stats#"


def stats_partition(tenant: str) -> str:
    return PREFIX + tenant


class RunStatsStore:
    """Adds to and reads the per-minute run statistics (metered client, Runs table)."""

    def __init__(self, dynamo: Table, table: str, retention: timedelta):
        self.dynamo = dynamo
        self.table = table
        self.retention = retention

    def add(self, tallies: Mapping[tuple[str, str], Mapping[str, int]]) -> int:
        """Add each (tenant, minute)'s counters to its item (created by the first add); the number of
        items written."""
        written = 0
        for (tenant, minute), counters in sorted(tallies.items()):
            counted = {name: n for name, n in counters.items() if n and name in COUNTERS}
            if not counted:
                continue
            expires = minute_of(minute) + self.retention
            names = {f"#c{i}": name for i, name in enumerate(counted)}
            values: dict[str, Any] = {f":c{i}": n for i, n in enumerate(counted.values())}
            adds = ", ".join(f"#c{i} :c{i}" for i in range(len(counted)))
            self.dynamo.update(
                self.table,
                {"job_id": stats_partition(tenant), "run_key": minute},
                f"SET expires_at = :exp ADD {adds}",
                names=names,
                values={**values, ":exp": int(expires.timestamp())},
            )
            written += 1
        return written

    def minutes(self, tenant: str, span: StatsRange) -> list[dict[str, Any]]:
        """The tenant's minute items in ``span``: ``{"minute": key, <counter>: n, ...}``, oldest first."""
        items = self.dynamo.query_all(
            self.table,
            "job_id = :p AND run_key BETWEEN :lo AND :hi",
            {":p": stats_partition(tenant), ":lo": span.first_key(), ":hi": span.last_key()},
        )
        return [
            {"minute": item["run_key"], **{name: int(item[name]) for name in COUNTERS if name in item}}
            for item in items
        ]
