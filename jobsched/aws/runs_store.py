"""The Runs table: one item per run (pk ``job_id``, sk ``run_key``), the tenant run feed (items under
``feed#<tenant>``, see :mod:`jobsched.aws.run_feed`) and the sparse ``dead_letter_index``.

A run is created with a conditional put on its deterministic key — the "one run per occurrence"
guarantee — and the stored run is returned when it already exists, so a retried dispatch reuses it.
Every new run is recorded in its tenant's feed *before* it is put (:meth:`RunsStore.create` does both;
a caller creating many runs records them with one :meth:`RunsStore.announce` and then puts each with
:meth:`RunsStore.put_announced`), so a crash can leave a feed entry without its run (skipped on read)
but never a run the tenant listing cannot see. Listing a job's runs is a Query on the partition; a
tenant's runs a Query on its feed plus BatchGetItem; dead letters a Query on their sparse index: no
scans.

With a ``retention`` (the deployment's ``retention_days``), every run put here carries the table's
TTL attribute ``expires_at`` = the later of its ``created_at`` and ``due_at`` + retention, and its
feed entry (and in-flight ledger item) the same expiry, so
DynamoDB deletes both; a replay moves the run's expiry to the replay's instant + retention
(:mod:`jobsched.services.runs`).
"""

from __future__ import annotations

import contextvars
import secrets
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.metering import ConditionFailed
from jobsched.aws.run_feed import RunFeed, feed_entry
from jobsched.core.errors import ConflictError, NotFoundError
from jobsched.core.feed import entry_key, feed_items
from jobsched.core.inflight import due_groups, ledger_items
from jobsched.core.models import (
    Run,
    RunState,
    check_transition,
    parse_run_id,
    run_key_for,
    tenant_sort_for,
    to_iso,
)
from jobsched.ports.tables import Table

DEAD_LETTER_INDEX = "dead_letter_index"
#: Sorts after every suffix a run key of the same instant may carry (``.m…``, ``.b…``, ``.r…``).
_AFTER_SUFFIXES = "~"


def new_send_token() -> str:
    """A fresh ``send_token`` (48 random bits): recorded on a run with the write that precedes a send,
    carried by that message; the worker's claim accepts only the run's current token."""
    return secrets.token_urlsafe(6)


#: The run was queued under a job version older than ``:v`` (or none is recorded on it).
_OLDER_VERSION = "(attribute_not_exists(job_version) OR job_version < :v)"
_WITHDRAWN = "#state = :skipped AND skip_reason = :reason AND attribute_not_exists(skipped_count)"


def _handler_update(run: Run) -> tuple[str, dict[str, Any]]:
    """The update clauses that write ``run``'s handler and pinned version (removed when None) and its
    pool (removed when ``lambda``, as :meth:`Run.to_item` leaves it out); ``#handler`` and ``#pool``
    name ``handler`` and ``pool``, DynamoDB reserved words."""
    sets, values, removes = "", {}, []
    pool = run.pool if run.pool != "lambda" else None
    for path, value in (("#handler", run.handler), ("handler_version", run.handler_version), ("#pool", pool)):
        if value is None:
            removes.append(path)
        else:
            sets += f", {path} = :{path.lstrip('#')}"
            values[f":{path.lstrip('#')}"] = value
    return sets + (" REMOVE " + ", ".join(removes) if removes else ""), values


def is_withdrawn(run: Run, reason: str = "paused") -> bool:
    """Whether ``run`` is the record a pause (``reason``) left for a withdrawn occurrence."""
    return run.state is RunState.SKIPPED and run.skip_reason == reason and not run.skipped_count


class RunsStore:
    def __init__(
        self,
        dynamo: Table,
        table: str,
        *,
        feed: RunFeed | None = None,
        retention: timedelta | None = None,
        token: Callable[[], str] = new_send_token,
    ):
        self.dynamo = dynamo
        self.table = table
        self.feed = feed or RunFeed(dynamo, table)
        self.retention = retention
        self.token = token

    def _tokened(self, run: Run) -> Run:
        """A queued ``run`` with a fresh ``send_token`` (the one its first message will carry)."""
        if run.state is not RunState.QUEUED or run.send_token is not None:
            return run
        return replace(run, send_token=self.token())

    def expiry_after(self, instant: datetime) -> int | None:
        """The TTL value (epoch seconds) of a run kept from ``instant``; None without a retention."""
        if self.retention is None:
            return None
        return int((instant + self.retention).timestamp())

    def _expiring(self, run: Run) -> Run:
        """``run`` with its ``expires_at`` (unless it has one, or the store keeps runs forever): kept a
        retention from the later of its creation and its due instant, so a run queued ahead of its
        instant is kept as long after it as one created when due."""
        if run.expires_at is not None or self.retention is None:
            return run
        return replace(run, expires_at=self.expiry_after(max(run.created_at, run.due_at)))

    def create(self, run: Run) -> tuple[Run, bool]:
        """Record ``run`` in its tenant's feed, then put it unless its id exists: ``(run, True)`` when
        created, ``(stored run, False)`` if not."""
        self.announce([run])
        return self.put_announced(run)

    def announce(self, runs: Iterable[Run], *, feed: bool = True, at: datetime | None = None) -> int:
        """Record runs about to be put in their tenants' feeds and the queued ones in the in-flight
        ledger (:mod:`jobsched.core.inflight`, the sweeper's reach), all in one batched write; returns
        the items written. ``feed=False`` writes only the ledger (a replay of a run the feed lists);
        ``at``: when (default: the latest ``created_at`` of the runs)."""
        runs = [self._expiring(run) for run in runs]
        items = feed_items((feed_entry(r) for r in runs), self.feed.nonce) if feed else []
        queued = [r for r in runs if r.state is RunState.QUEUED]
        written = at or max((r.created_at for r in queued), default=None)
        for group in due_groups([r.due_at for r in queued]):  # one item per span of due instants
            part = [queued[i] for i in group]
            expiries = [r.expires_at for r in part]
            items += ledger_items(
                (tenant_sort_for(r.run_key, r.job_id) for r in part),
                written or part[0].created_at,
                self.feed.nonce,
                max(x for x in expiries if x is not None) if None not in expiries else None,
                min(r.due_at for r in part),
                (r.tenant for r in part),
            )
        if items:
            self.dynamo.batch_write(self.table, items)
        return len(items)

    def put_announced(self, run: Run) -> tuple[Run, bool]:
        """:meth:`create` for a run already recorded by :meth:`announce` (never call it otherwise: a
        run missing from the feed is missing from its tenant's listing)."""
        run = self._tokened(self._expiring(run))
        try:
            self.dynamo.put(self.table, run.to_item(), condition="attribute_not_exists(run_key)")
        except ConditionFailed as failed:
            if failed.existing is not None:
                return Run.from_item(failed.existing), False
            return self.get(run.id), False
        return run, True

    def put_announced_many(self, runs: list[Run], *, concurrency: int = 1) -> list[tuple[Run, bool]]:
        """:meth:`put_announced` for each of ``runs`` (already announced), with up to ``concurrency``
        requests in flight at once; results in the order of ``runs``.

        Each run is still its own PutItem conditional on its id's absence, so a run id is created at
        most once whatever the concurrency (two backfills of one range racing each other included);
        only the waiting is overlapped (docs/decisions/0020-scale-figures-and-fast-backfill.md).
        """
        if concurrency <= 1 or len(runs) <= 1:
            return [self.put_announced(run) for run in runs]
        with ThreadPoolExecutor(max_workers=min(concurrency, len(runs)), thread_name_prefix="put") as pool:
            # Each put in a copy of the caller's context (its log keys, its lane), as read_runs does.
            futures = [pool.submit(contextvars.copy_context().run, self.put_announced, run) for run in runs]
            return [future.result() for future in futures]

    def revive(self, record: Run, withdrawn: Run, reason: str = "paused") -> tuple[Run, bool]:
        """Put ``record`` (a queued run, or a skipped or summary record) in place of ``withdrawn``, the
        skipped record a pause left for the same occurrence: ``(record, True)`` when replaced.

        Conditional on the stored item still being skipped for ``reason`` and not a summary, so the
        occurrence keeps one item (one run per occurrence) and a record something else changed since
        is never overwritten: then ``(stored item, False)``. The run keeps its first ``created_at``
        (the tenant's run feed already lists it). Returns ``(withdrawn, False)`` unchanged when
        ``withdrawn`` is not such a record.
        """
        if not is_withdrawn(withdrawn, reason):
            return withdrawn, False
        # A fresh send token: the message the pause withdrew may still be in its queue, and only the
        # revive's message may execute the run (it carries the job as it is now).
        record = self._tokened(replace(record, send_token=None))
        item = {**record.to_item(), "created_at": to_iso(withdrawn.created_at)}
        try:
            self.dynamo.put(
                self.table,
                item,
                condition=_WITHDRAWN,
                names={"#state": "state"},
                values={":skipped": str(RunState.SKIPPED), ":reason": reason},
            )
        except ConditionFailed as failed:
            if failed.existing is not None:
                return Run.from_item(failed.existing), False
            return self.get(record.id), False
        return Run.from_item(item), True

    def refresh(self, run: Run, updated: Run, version: int) -> Run | None:
        """Rewrite the queued ``run`` in place as ``updated`` (its due instant, priority and
        ``max_attempts`` under job ``version``) with a fresh ``send_token``: the message sent next with
        that token is the only one that executes it (every earlier message is stale at the claim).

        Conditional on the run being ``queued`` and queued under an older job version (or none
        recorded), so two writers never both refresh it for one version and a slower writer never puts
        an older definition back. None when the condition failed (the run was claimed, withdrawn, or is
        already at ``version`` or newer: its writer sent its own message). The handler and its pinned
        version follow ``updated`` (an unbound run's pin is the edited job's; decision 0048)."""
        handler_sets, handler_values = _handler_update(updated)
        try:
            item = self.dynamo.update(
                self.table,
                {"job_id": run.job_id, "run_key": run.run_key},
                "SET send_token = :token, due_at = :due, priority = :priority, max_attempts = :max, "
                "job_version = :v" + handler_sets,
                condition="#state = :queued AND " + _OLDER_VERSION,
                names={"#state": "state", "#handler": "handler", "#pool": "pool"},
                values={
                    ":queued": str(RunState.QUEUED),
                    ":token": self.token(),
                    ":due": to_iso(updated.due_at),
                    ":priority": updated.priority,
                    ":max": updated.max_attempts,
                    ":v": version,
                    **handler_values,
                },
            )
        except ConditionFailed:
            return None
        return Run.from_item(item)

    def reschedule(self, run: Run, version: int, now: datetime, reason: str) -> Run | None:
        """Record the queued ``run`` ``skipped`` for ``reason`` (final) if it is still queued under a job
        version older than ``version`` (an edit whose timing has no occurrence at its instant); None
        when it moved on or a newer version queued it."""
        try:
            item = self.dynamo.update(
                self.table,
                {"job_id": run.job_id, "run_key": run.run_key},
                "SET #state = :skipped, finished_at = :now, skip_reason = :reason",
                condition="#state = :queued AND " + _OLDER_VERSION,
                names={"#state": "state"},
                values={
                    ":queued": str(RunState.QUEUED),
                    ":skipped": str(RunState.SKIPPED),
                    ":now": to_iso(now),
                    ":reason": reason,
                    ":v": version,
                },
            )
        except ConditionFailed:
            return None
        return Run.from_item(item)

    def withdrawn_after(
        self, job_id: str, now: datetime, jitter_seconds: int = 0, reason: str = "paused"
    ) -> list[Run]:
        """The job's records skipped for ``reason`` (withdrawn by a pause) whose due instant is after
        ``now`` (summary records left out)."""
        return self._due_after(
            job_id,
            now,
            jitter_seconds,
            lambda r: is_withdrawn(r, reason),
        )

    def relabel_skipped(self, run: Run, old_reason: str, new_reason: str) -> Run | None:
        """Change a skipped record's reason if it still is ``old_reason`` (None when it changed since)."""
        try:
            item = self.dynamo.update(
                self.table,
                {"job_id": run.job_id, "run_key": run.run_key},
                "SET skip_reason = :new",
                condition="#state = :skipped AND skip_reason = :old",
                names={"#state": "state"},
                values={":new": new_reason, ":old": old_reason, ":skipped": str(RunState.SKIPPED)},
            )
        except ConditionFailed:
            return None
        return Run.from_item(item)

    def get(self, run_id: str, tenant: str | None = None, *, consistent: bool = True) -> Run:
        """The run; with ``tenant`` given, another tenant's run is reported as not found."""
        job_id, run_key = parse_run_id(run_id)
        item = self.dynamo.get(self.table, {"job_id": job_id, "run_key": run_key}, consistent=consistent)
        if item is None or (tenant is not None and item.get("tenant") != tenant):
            raise NotFoundError(f"run {run_id} not found")
        return Run.from_item(item)

    def find(self, run_id: str) -> Run | None:
        try:
            return self.get(run_id)
        except NotFoundError:
            return None

    def list_for_job(
        self,
        job_id: str,
        *,
        limit: int = 50,
        newest_first: bool = True,
        start_after: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        after: datetime | None = None,
    ) -> tuple[list[Run], str | None]:
        """A page of a job's runs by scheduled instant; the cursor is the last run key of the page.

        ``since``: scheduled at or after; ``until``: scheduled at or before (manual, backfill and replay
        runs of that instant included); ``after``: scheduled strictly after (the complement of
        ``until``). ``since`` combines with ``until`` only.
        A workflow's node runs (``wf_node``, :mod:`jobsched.core.dag`) share their workflow's partition
        and are left out: a workflow job's runs are its workflow runs (a page may come out shorter)."""
        condition, values = "job_id = :j", {":j": job_id}
        high = run_key_for(until) + _AFTER_SUFFIXES if until is not None else None
        if since is not None and high is not None:
            condition += " AND run_key BETWEEN :k AND :hi"
            values |= {":k": run_key_for(since), ":hi": high}
        elif since is not None:
            condition += " AND run_key >= :k"
            values[":k"] = run_key_for(since)
        elif high is not None:
            condition += " AND run_key <= :hi"
            values[":hi"] = high
        elif after is not None:
            condition += " AND run_key > :lo"
            values[":lo"] = run_key_for(after) + _AFTER_SUFFIXES
        start = {"job_id": job_id, "run_key": start_after} if start_after else None
        items, last = self.dynamo.query(
            self.table, condition, values, limit=limit, forward=not newest_first, start_key=start
        )
        return [Run.from_item(i) for i in items if "wf_node" not in i], (last or {}).get("run_key")

    def list_for_tenant(
        self, tenant: str, *, limit: int = 50, start_after: str | None = None
    ) -> tuple[list[Run], str | None]:
        """A page of the tenant's runs, newest scheduled first; the cursor is the last ``tenant_sort``.

        Reads the tenant's feed bucket by bucket (newest first), and the runs its entries name with
        BatchGetItem, only as many as the page still needs; entries whose run does not exist are
        skipped. ``None`` as the cursor: the list ended."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        runs: list[Run] = []
        for entries in self.feed.buckets(tenant, before=start_after):
            while entries:
                # Fetch no more entries than the page still needs: every run found fits in the page.
                n = min(100, limit - len(runs))
                chunk, entries = entries[:n], entries[n:]
                runs += self._found(tenant, chunk)
                if len(runs) == limit:
                    last = runs[-1]
                    return runs, tenant_sort_for(last.run_key, last.job_id)
        return runs, None

    def _found(self, tenant: str, entries: list[str]) -> list[Run]:
        """The runs ``entries`` name that exist (and are the tenant's), in the entries' order."""
        keys = [entry_key(e) for e in entries]
        items = self.dynamo.batch_get(self.table, keys)
        by_key = {(i["job_id"], i["run_key"]): i for i in items if i.get("tenant") == tenant}
        found = (by_key.get((k["job_id"], k["run_key"])) for k in keys)
        return [Run.from_item(i) for i in found if i is not None]

    def list_dead_letters(
        self, tenant: str, *, limit: int = 50, start_key: dict[str, Any] | None = None
    ) -> tuple[list[Run], dict[str, Any] | None]:
        """A page of the tenant's dead letters (failed runs), newest first."""
        items, last = self.dynamo.query(
            self.table,
            "dl_tenant = :t",
            {":t": tenant},
            index=DEAD_LETTER_INDEX,
            limit=limit,
            forward=False,
            start_key=start_key,
        )
        return [Run.from_item(i) for i in items], last

    def queued_ahead(self, job_id: str, now: datetime, jitter_seconds: int = 0) -> list[Run]:
        """The job's runs still queued whose due instant is after ``now`` (enqueued ahead of time)."""
        return self._due_after(job_id, now, jitter_seconds, lambda r: r.state is RunState.QUEUED)

    def _due_after(
        self, job_id: str, now: datetime, jitter_seconds: int, keep: Callable[[Run], bool]
    ) -> list[Run]:
        """The job's runs due after ``now`` that ``keep`` accepts, oldest first (a run is due at most
        ``jitter_seconds`` after its scheduled instant, so the query starts that far back)."""
        since = now - timedelta(seconds=jitter_seconds)
        out: list[Run] = []
        start: str | None = None
        while True:
            runs, start = self.list_for_job(
                job_id, limit=100, newest_first=False, start_after=start, since=since
            )
            out.extend(r for r in runs if r.due_at > now and keep(r))
            if start is None:
                return out

    def transition(
        self,
        run: Run,
        new_state: RunState,
        now: datetime,
        *,
        reason: str | None = None,
    ) -> Run | None:
        """Move ``run`` from its current state to ``new_state`` if it is still in that state.

        Returns the updated run, or None when the stored state had moved on (someone else won).
        Raises :class:`ConflictError` for a transition the state machine forbids.
        """
        check_transition(run.state, new_state)
        sets = ["#state = :new"]
        values: dict[str, Any] = {":new": str(new_state), ":old": str(run.state)}
        if new_state in (RunState.SKIPPED, RunState.CANCELLED, RunState.SUCCEEDED, RunState.FAILED):
            sets.append("finished_at = :now")
            values[":now"] = to_iso(now)
        if reason is not None:
            field = "skip_reason" if new_state is RunState.SKIPPED else "#error"
            sets.append(f"{field} = :reason")
            values[":reason"] = reason
        names = {"#state": "state"}
        if reason is not None and new_state is not RunState.SKIPPED:
            names["#error"] = "error"
        try:
            item = self.dynamo.update(
                self.table,
                {"job_id": run.job_id, "run_key": run.run_key},
                "SET " + ", ".join(sets),
                condition="#state = :old",
                names=names,
                values=values,
            )
        except ConditionFailed:
            return None
        return Run.from_item(item)

    def request_cancel(self, run: Run) -> Run | None:
        """Flag a running/retrying run for cancellation (its worker sees the flag on its next heartbeat)."""
        if run.state not in (RunState.RUNNING, RunState.RETRYING):
            raise ConflictError(f"a {run.state} run cannot be flagged for cancellation")
        try:
            item = self.dynamo.update(
                self.table,
                {"job_id": run.job_id, "run_key": run.run_key},
                "SET cancel_requested = :t",
                condition="#state IN (:running, :retrying)",
                names={"#state": "state"},
                values={":t": True, ":running": "running", ":retrying": "retrying"},
            )
        except ConditionFailed:
            return None
        return Run.from_item(item)
