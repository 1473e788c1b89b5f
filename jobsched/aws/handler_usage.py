"""What refers to handlers, read from the Jobs and Runs tables (``GET /handlers``, decision 0049).

Each read follows what it counts, never the run history:

* **jobs**: one tenant's partition of the Jobs table (a Query; its size is capped by the tenant's job
  limit), or for every tenant a Scan of the Jobs table (it holds the jobs and nothing else);
* **runs in flight** (queued, running, retrying): the runs the in-flight ledger names
  (:mod:`jobsched.core.inflight`), as :class:`~jobsched.aws.state_listing.StateListing` lists them;
* **dead letters**: the sparse ``dead_letter_index`` (only dead-lettered runs carry its keys), one
  tenant's partition or, for every tenant, a Scan of the index.

A run names its handler and bound version (``Run.handler``, ``Run.handler_version``); a run written
before runs carried them is attributed through its job's target (pinned version, else unbound).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jobsched.aws.jobs_store import BODY_MARK
from jobsched.aws.run_reads import read_runs
from jobsched.aws.state_listing import DEAD_LETTER_INDEX
from jobsched.core.feed import entry_key
from jobsched.core.handlers import Reference, handler_targets
from jobsched.core.inflight import listed_entries, partitions
from jobsched.core.models import ACTIVE_RUN_STATES, Run, RunState
from jobsched.ports.tables import Table

_KIND_OF_STATE = {RunState.QUEUED: "queued", RunState.RUNNING: "running", RunState.RETRYING: "retrying"}


class HandlerUsage:
    """The :class:`~jobsched.ports.handlers.HandlerReferences` of a deployment's Jobs and Runs tables."""

    def __init__(self, dynamo: Table, jobs_table: str, runs_table: str):
        self.dynamo = dynamo
        self.jobs_table = jobs_table
        self.runs_table = runs_table

    def references(self, tenant: str | None) -> Iterator[Reference]:
        jobs = self._jobs(tenant)
        targets = {str(item["job_id"]): item.get("target") for item in jobs}
        for item in jobs:
            yield from _job_references(item)
        for run in self._in_flight(tenant):
            yield from _run_references(run, _KIND_OF_STATE[run.state], targets)
        for run in self._dead_letters(tenant):
            yield from _run_references(run, "dead_lettered", targets)

    def _jobs(self, tenant: str | None) -> list[dict[str, Any]]:
        if tenant is None:
            items = self.dynamo.scan_all(self.jobs_table, filter_expression="attribute_exists(target)")
        else:
            items = self.dynamo.query_all(
                self.jobs_table, "tenant = :t", {":t": tenant}, filter_expression="attribute_exists(target)"
            )
        return [i for i in items if BODY_MARK not in str(i.get("job_id", ""))]

    def _in_flight(self, tenant: str | None) -> list[Run]:
        ledger = [
            item
            for partition in partitions()
            for item in self.dynamo.query_all(self.runs_table, "job_id = :p", {":p": partition})
        ]
        if tenant is None:
            entries = sorted({entry for item in ledger for entry in item.get("runs", [])})
        else:
            entries = listed_entries(ledger, tenant)
        items = read_runs(self.dynamo, self.runs_table, map(entry_key, entries))
        runs = [Run.from_item(item) for item in items.values()]
        return [r for r in runs if r.state in ACTIVE_RUN_STATES and (tenant is None or r.tenant == tenant)]

    def _dead_letters(self, tenant: str | None) -> list[Run]:
        if tenant is None:
            items = self.dynamo.scan_all(self.runs_table, index=DEAD_LETTER_INDEX)
        else:
            items = self.dynamo.query_all(
                self.runs_table, "dl_tenant = :t", {":t": tenant}, index=DEAD_LETTER_INDEX
            )
        # A replay in progress is still keyed on the index (back to queued): the ledger counts it.
        failed = str(RunState.FAILED)
        return [
            Run.from_item(item)
            for item in items
            if item.get("state") == failed and (tenant is None or item.get("tenant") == tenant)
        ]


def _job_references(item: Mapping[str, Any]) -> Iterator[Reference]:
    target = item.get("target")
    job_id = str(item["job_id"])
    node = isinstance(target, Mapping) and "workflow" in target
    payload_version = item.get("payload_version")
    for name, version, _ in handler_targets(target):
        yield Reference(
            "jobs",
            job_id,
            name,
            int(version) if version is not None else None,
            payload_version=None if node or payload_version is None else int(payload_version),
            node=node,
        )


def _run_references(run: Run, kind: str, targets: Mapping[str, Any]) -> Iterator[Reference]:
    if run.handler is not None:
        yield Reference(kind, run.id, run.handler, run.handler_version)
        return
    target = targets.get(run.job_id)
    if run.wf_node is None and isinstance(target, Mapping) and isinstance(target.get("handler"), str):
        ((name, version, _),) = handler_targets(target)
        yield Reference(kind, run.id, name, version)
