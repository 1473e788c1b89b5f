"""The Jobs table: one item per job (pk ``tenant``, sk ``job_id``) and the sparse ``due_index`` (keyed
by due partition ``p<n>`` and due instant: docs/decisions/0016-due-partitions.md); a payload over
256 bytes is kept in a second item (sk ``<job_id>#payload#<hash>``) so that the job item
the dispatcher rewrites on every advance stays under 1 KB. A name declared with ``PUT /jobs/by-name``
has a *name item* (sk ``name#<name>``, attribute ``named_job``: the job id it names; no ``name`` attribute, so
listings leave it out): its conditional put is what keeps a declared name unique per tenant
(docs/decisions/0060-schedules-as-code.md).

Every write here is conditional: creation on absence, edits on the caller's ``version`` (optimistic
concurrency), dispatcher advances on the exact ``next_due_at`` and ``version`` the dispatcher read
plus its fencing token. A condition that fails raises, and nothing is written.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from datetime import datetime
from typing import Any

from jobsched.aws.metering import ConditionFailed
from jobsched.core.errors import ConflictError, LeaseLostError, NotFoundError, PreconditionFailedError
from jobsched.core.messages import payload_size
from jobsched.core.models import (
    Job,
    JobState,
    from_iso,
    partition_for,
    partition_key,
    to_epoch_ms,
    to_iso,
)
from jobsched.ports.tables import Table

DUE_INDEX = "due_index"
#: Payloads up to this size (compact JSON) stay in the job item; larger ones get an item of their own,
#: so the dispatcher's advance — billed by the size of the whole item — stays at 1 WRU.
INLINE_PAYLOAD_BYTES = 256
BODY_MARK = "#payload#"
#: The sort key prefix of a name item (job ids are ``[A-Za-z0-9_-]``, so none starts with it).
NAME_MARK = "name#"


def _payload_hash(payload: dict[str, Any]) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def _split(job: Job) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(head item, body item or None): the payload moves out when it is over the inline size."""
    head = job.to_item()
    if payload_size(job.payload) <= INLINE_PAYLOAD_BYTES:
        return head, None
    digest = _payload_hash(job.payload)
    head.pop("payload")
    head["payload_body"] = digest
    return head, {"tenant": job.tenant, "job_id": f"{job.id}{BODY_MARK}{digest}", "payload": job.payload}


def _body_key(job: Job) -> dict[str, str] | None:
    if payload_size(job.payload) <= INLINE_PAYLOAD_BYTES:
        return None
    return {"tenant": job.tenant, "job_id": f"{job.id}{BODY_MARK}{_payload_hash(job.payload)}"}


class StaleJobError(ConflictError):
    """Raised when a dispatcher's advance finds the job changed since it was read (another tick, an edit,
    a pause): the dispatcher drops its plan for the job; the next tick starts from the stored state."""

    code = "stale_job"


class JobExistsError(ConflictError):
    """Raised when a job is created under an id that is already stored for the tenant. Ids are random
    or fixed per ``Idempotency-Key`` claim, so this means the same create was written before: by an
    earlier request with the same key, or by this call's own write that the SDK retried."""

    code = "job_exists"

    def __init__(self, job_id: str):
        super().__init__(f"job {job_id} already exists")
        self.job_id = job_id


class JobsStore:
    def __init__(self, dynamo: Table, table: str):
        self.dynamo = dynamo
        self.table = table

    def create(self, job: Job) -> Job:
        """Store a new job, on the condition that the tenant has no job with its id
        (:class:`JobExistsError` if it has: the stored job is left as it is)."""
        head, body = _split(job)
        if body is not None:
            self.dynamo.put(self.table, body)  # unreachable until the head points at it
        try:
            self.dynamo.put(self.table, head, condition="attribute_not_exists(job_id)")
        except ConditionFailed as failed:
            stored = failed.existing
            if body is not None and stored is not None and stored.get("payload_body") != head["payload_body"]:
                # The stored job (edited since) points at another payload item: ours would be orphaned.
                self.dynamo.delete(self.table, {"tenant": job.tenant, "job_id": body["job_id"]})
            raise JobExistsError(job.id) from None
        return job

    def get(self, tenant: str, job_id: str, *, consistent: bool = True) -> Job:
        """The tenant's job; another tenant's job is reported exactly like a missing one."""
        item = self.dynamo.get(self.table, {"tenant": tenant, "job_id": job_id}, consistent=consistent)
        if item is None or BODY_MARK in job_id or job_id.startswith(NAME_MARK):
            raise NotFoundError(f"job {job_id} not found")
        return self._hydrate([item], consistent)[0]

    def list(
        self, tenant: str, *, limit: int = 50, start_after: str | None = None
    ) -> tuple[builtins.list[Job], str | None]:
        """A page of the tenant's jobs ordered by id; the cursor is the last job id of the page."""
        start = {"tenant": tenant, "job_id": start_after} if start_after else None
        items, last = self.dynamo.query(
            self.table,
            "tenant = :t",
            {":t": tenant},
            limit=limit,
            start_key=start,
            filter_expression="attribute_exists(#name)",  # leaves out payload bodies
            names={"#name": "name"},
        )
        cursor = (last or {}).get("job_id")
        return self._hydrate(items, False), cursor.split(BODY_MARK)[0] if cursor else None

    def replace(self, job: Job, expected_version: int, read: Job | None = None) -> Job:
        """Write ``job`` in full if the stored version is ``expected_version`` (PreconditionFailed if not).

        With ``read`` (the job as the caller read it) the write also requires that the dispatcher has
        not advanced the job since (same ``updated_at``); if it has, :class:`StaleJobError` tells the
        caller to re-read and retry, so a definition edit never rolls the dispatch cursor back.
        A large payload lives in its own item keyed by its content hash: written before the head that
        points at it (an unchanged payload is not rewritten), the old one deleted after.
        """
        head, body = _split(job)
        old_body = _body_key(read) if read is not None else None
        if body is not None and (old_body is None or old_body["job_id"] != body["job_id"]):
            self.dynamo.put(self.table, body)
        condition = "attribute_exists(job_id) AND version = :v"
        values: dict[str, Any] = {":v": expected_version}
        if read is not None:
            condition += " AND updated_at = :u"
            values[":u"] = to_iso(read.updated_at)
        try:
            self.dynamo.put(self.table, head, condition=condition, values=values)
        except ConditionFailed as failed:
            if failed.existing is None:
                raise NotFoundError(f"job {job.id} not found") from None
            if int(failed.existing.get("version", -1)) == expected_version:
                raise StaleJobError(f"job {job.id} was advanced by the dispatcher meanwhile") from None
            raise PreconditionFailedError(
                f"job {job.id} is at version {failed.existing.get('version')}, not {expected_version}"
            ) from None
        if old_body is not None and (body is None or old_body["job_id"] != body["job_id"]):
            self.dynamo.delete(self.table, old_body)
        return job

    def delete(self, tenant: str, job_id: str, expected_version: int | None = None) -> None:
        condition = "attribute_exists(job_id)" + (" AND version = :v" if expected_version is not None else "")
        values = {":v": expected_version} if expected_version is not None else None
        try:
            old = self.dynamo.delete(
                self.table, {"tenant": tenant, "job_id": job_id}, condition=condition, values=values
            )
        except ConditionFailed:
            current = self.dynamo.get(self.table, {"tenant": tenant, "job_id": job_id}, consistent=True)
            if current is None:
                raise NotFoundError(f"job {job_id} not found") from None
            raise PreconditionFailedError(
                f"job {job_id} is at version {current.get('version')}, not {expected_version}"
            ) from None
        if old and old.get("payload_body"):
            self.dynamo.delete(
                self.table, {"tenant": tenant, "job_id": f"{job_id}{BODY_MARK}{old['payload_body']}"}
            )

    # --- declared names (PUT /jobs/by-name) ----------------------------------------------------------

    def name_ref(self, tenant: str, name: str) -> tuple[str, datetime] | None:
        """(the job id the tenant's declared ``name`` refers to, when the name was claimed), or None."""
        item = self.dynamo.get(self.table, _name_key(tenant, name), consistent=True)
        if item is None:
            return None
        return str(item["named_job"]), from_iso(str(item["claimed_at"]))

    def claim_name(
        self, tenant: str, name: str, job_id: str, now: datetime, *, replacing: str | None = None
    ) -> bool:
        """Make ``name`` refer to ``job_id``: on the condition that no name item exists, or with
        ``replacing`` that it still refers to that id. False (nothing written) if the condition fails."""
        item = {**_name_key(tenant, name), "named_job": job_id, "claimed_at": to_iso(now)}
        if replacing is None:
            condition, values = "attribute_not_exists(job_id)", None
        else:
            condition, values = "named_job = :old", {":old": replacing}
        try:
            self.dynamo.put(self.table, item, condition=condition, values=values)
        except ConditionFailed:
            return False
        return True

    def release_name(self, tenant: str, name: str, job_id: str) -> bool:
        """Delete the name item if it still refers to ``job_id`` (whether it was deleted)."""
        try:
            self.dynamo.delete(
                self.table, _name_key(tenant, name), condition="named_job = :id", values={":id": job_id}
            )
        except ConditionFailed:
            return False
        return True

    def declared_names(self, tenant: str) -> dict[str, str]:
        """Every name the tenant declared, with the job id it refers to."""
        items = self.dynamo.query_all(
            self.table,
            "tenant = :t AND begins_with(job_id, :m)",
            {":t": tenant, ":m": NAME_MARK},
        )
        return {str(i["job_id"]).removeprefix(NAME_MARK): str(i["named_job"]) for i in items}

    def named(self, tenant: str, name: str) -> builtins.list[Job]:
        """The tenant's jobs whose ``name`` is ``name`` (one Query of the tenant's jobs, paged)."""
        items = self.dynamo.query_all(
            self.table,
            "tenant = :t",
            {":t": tenant, ":n": name},
            filter_expression="#name = :n",
            names={"#name": "name"},
        )
        return self._hydrate(items, True)

    def _hydrate(self, items: builtins.list[dict[str, Any]], consistent: bool) -> builtins.list[Job]:
        """Jobs from head items, with the payloads kept in body items read back in one batch."""
        keys = [
            {"tenant": i["tenant"], "job_id": f"{i['job_id']}{BODY_MARK}{i['payload_body']}"}
            for i in items
            if i.get("payload_body")
        ]
        # A body item never changes (its key is its content's hash) and is written before any head
        # points at it, so an eventually consistent read returns the right payload or none; the few it
        # misses (written a moment ago) are read again consistently.
        bodies = {b["job_id"]: b["payload"] for b in self.dynamo.batch_get(self.table, keys)}
        missing = [k for k in keys if k["job_id"] not in bodies]
        if missing and consistent:
            bodies.update(
                (b["job_id"], b["payload"])
                for b in self.dynamo.batch_get(self.table, missing, consistent=True)
            )
        jobs = []
        for item in items:
            if item.get("payload_body"):
                item = {
                    **item,
                    "payload": bodies.get(f"{item['job_id']}{BODY_MARK}{item['payload_body']}", {}),
                }
            jobs.append(Job.from_item(item))
        return jobs

    # --- dispatcher side ------------------------------------------------------------------------

    def due_keys(
        self, key: str, until: datetime, *, limit: int = 100, start_key: dict[str, Any] | None = None
    ) -> tuple[builtins.list[tuple[str, str]], dict[str, Any] | None]:
        """One page of (tenant, job_id) due at or before ``until`` under due index key ``key`` (a
        partition's ``p<n>``, or a legacy shard number), earliest first."""
        items, last = self.dynamo.query(
            self.table,
            "due_shard = :s AND due_at <= :u",
            {":s": key, ":u": to_epoch_ms(until)},
            index=DUE_INDEX,
            limit=limit,
            start_key=start_key,
        )
        return [(i["tenant"], i["job_id"]) for i in items], last

    def rekey_legacy(self, key: str) -> int:
        """Move every job indexed under the legacy key ``key`` (a bare shard number, written before due
        partitions) to its partition's key; returns how many moved.

        Each move is one update conditional on the item still carrying ``key``: a job a writer re-indexed
        meanwhile (any write of this version indexes by partition) is left as it is. Nothing else of the
        item changes, so no other writer's condition (version, ``next_due_at``, fence) is affected.
        """
        moved = 0
        for item in self.dynamo.query_all(self.table, "due_shard = :s", {":s": key}, index=DUE_INDEX):
            try:
                self.dynamo.update(
                    self.table,
                    {"tenant": item["tenant"], "job_id": item["job_id"]},
                    "SET due_shard = :p",
                    condition="due_shard = :s",
                    values={":p": partition_key(partition_for(item["job_id"])), ":s": key},
                )
            except ConditionFailed:
                continue
            moved += 1
        return moved

    def get_many(self, keys: builtins.list[tuple[str, str]]) -> builtins.list[Job]:
        """Jobs for (tenant, job_id) keys, in the order given; keys that vanished are left out."""
        if not keys:
            return []
        items = self.dynamo.batch_get(
            self.table, [{"tenant": t, "job_id": j} for t, j in keys], consistent=True
        )
        by_key = {(j.tenant, j.id): j for j in self._hydrate(items, True)}
        return [by_key[k] for k in keys if k in by_key]

    def advance(self, read: Job, updated: Job, fence: int | None, fence_lease: str | None = None) -> None:
        """Store the dispatcher's bookkeeping of ``updated`` if the job is still as ``read``.

        Conditional on the ``next_due_at``, ``version`` and state that were read (a concurrent tick,
        edit or pause makes it fail with :class:`StaleJobError`) and, when ``fence`` is given, on no
        higher fencing token having advanced the job (:class:`LeaseLostError`). With ``fence_lease`` (the
        lease the token belongs to) the tokens are compared only when the job was last advanced under
        that same lease: tokens of different shard leases are unrelated numbers, and a job whose
        partition changed owner (the shard count changed) must not be refused for good by them. Across
        leases the conditions on the state read keep one advance per state. Only dispatch fields are
        written, so a definition edit is never overwritten.
        """
        sets: dict[str, Any] = {
            "updated_at": to_iso(updated.updated_at),
            "state": str(updated.state),
        }
        removes: builtins.list[str] = []
        optional = {
            "next_due_at": to_iso(updated.next_due_at) if updated.next_due_at else None,
            "last_fired_at": to_iso(updated.last_fired_at) if updated.last_fired_at else None,
            "last_run_id": updated.last_run_id,
            "buffered_at": to_iso(updated.buffered_at) if updated.buffered_at else None,
            "misfire_override": updated.misfire_override,
        }
        due = updated.due_index_attributes()
        optional["due_shard"] = due.get("due_shard")
        optional["due_at"] = due.get("due_at")
        for name, value in optional.items():
            if value is None:
                removes.append(name)
            else:
                sets[name] = value
        # Leave the index keys alone when they do not change: rewriting them is billed twice. When the
        # entry moves, both keys are written, so a job still under a legacy key is re-indexed.
        if read.due_index_attributes() == due:
            for name in ("due_shard", "due_at"):
                sets.pop(name, None)
                if name in removes:
                    removes.remove(name)
        conditions = ["version = :v", "#state = :read_state"]
        values: dict[str, Any] = {":v": read.version, ":read_state": str(read.state)}
        if read.next_due_at is None:
            conditions.append("attribute_not_exists(next_due_at)")
        else:
            conditions.append("next_due_at = :read_due")
            values[":read_due"] = to_iso(read.next_due_at)
        if fence is not None:
            if fence_lease is None:
                conditions.append("(attribute_not_exists(fence) OR fence <= :fence)")
            else:
                conditions.append(
                    "(attribute_not_exists(fence) OR attribute_not_exists(fence_lease) "
                    "OR fence_lease <> :fence_lease OR fence <= :fence)"
                )
                values[":fence_lease"] = fence_lease
                sets["fence_lease"] = fence_lease
            values[":fence"] = fence
            sets["fence"] = fence
        names = {"#state": "state"}
        assignments = []
        for i, (name, value) in enumerate(sets.items()):
            placeholder = f"#a{i}"
            names[placeholder] = name
            assignments.append(f"{placeholder} = :a{i}")
            values[f":a{i}"] = value
        expression = "SET " + ", ".join(assignments)
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        try:
            self.dynamo.update(
                self.table,
                {"tenant": read.tenant, "job_id": read.id},
                expression,
                condition=" AND ".join(conditions),
                names=names,
                values=values,
            )
        except ConditionFailed as failed:
            existing = failed.existing
            if existing is None:
                raise StaleJobError(f"job {read.id} was deleted") from None
            same_lease = fence_lease is None or existing.get("fence_lease") == fence_lease
            if (
                fence is not None
                and same_lease
                and existing.get("fence") is not None
                and int(existing["fence"]) > fence
            ):
                raise LeaseLostError(
                    f"job {read.id} was advanced under fencing token {existing['fence']} > {fence}"
                ) from None
            raise StaleJobError(f"job {read.id} changed since it was read") from None


def _name_key(tenant: str, name: str) -> dict[str, str]:
    return {"tenant": tenant, "job_id": f"{NAME_MARK}{name}"}


def completed_or_active(next_due: datetime | None) -> JobState:
    """A job with no occurrence left is completed (one-off ``at()`` jobs after their run)."""
    return JobState.ACTIVE if next_due is not None else JobState.COMPLETED
