"""Fenced writes of a run's attempts: claim, heartbeat, complete, retry, fail (dead letter), cancel.

Every write is a conditional ``UpdateItem`` on the run item. A worker holds a run for one attempt
number ``a`` and one ``lease_owner``; each write after the claim is conditional on
``state = running AND attempt = a AND lease_owner = owner``, so a worker whose lease expired and whose
run was taken over (the takeover bumps the attempt) gets :class:`LeaseLostError` instead of
overwriting the new owner's result (guarantee 3).

A failed condition returns the item as it is (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so
deciding *why* a claim failed costs no extra read. Writes return ``ALL_NEW`` (free on UpdateItem)
so the worker learns ``max_attempts``, ``payload_override`` and ``cancel_requested`` without a GetItem.

A worker that stops before its run ends (the container worker's graceful stop, decision 0052) hands
the attempt back (:meth:`AttemptStore.hand_back`): a fenced write that ends its lease without using
the attempt; the next delivery claims the same attempt number again.

A dead-letter write (:meth:`AttemptStore.dead_letter`, :meth:`AttemptStore.fail_unclaimed`) also
sets ``notify_pending`` (= ``dl_at``) in the same write: the outbox mark of the notification the
dead letter owes (:mod:`jobsched.services.notifications`), removed by whoever delivers it. An
``on_dead_letter`` listener given to the store is called with the item as written, right after the
write; whatever it raises is logged and swallowed (the mark stays, and the sweeper delivers it).

Instants are stored as fixed-length ISO strings (``models.to_iso``), so ``lease_until < :now``
compares correctly as strings.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.metering import ConditionFailed
from jobsched.aws.sizing import read_units
from jobsched.core.errors import ConflictError, LeaseLostError, NotFoundError
from jobsched.core.models import ACTIVE_RUN_STATES, Run, RunState, limit_wait_attribute, parse_run_id, to_iso
from jobsched.ports.stores import Binding, Claim, ClaimStatus
from jobsched.ports.tables import Table

logger = logging.getLogger(__name__)

#: Called with a dead-lettered run's item (as written) and the instant of the write.
DeadLetterListener = Callable[[dict[str, Any], datetime], None]


class AttemptStore:
    """Conditional attempt writes on the Runs table (client and table name injected)."""

    def __init__(self, dynamo: Table, table: str, on_dead_letter: DeadLetterListener | None = None):
        self.dynamo = dynamo
        self.table = table
        #: Told of every dead letter this store writes (the notifier's immediate delivery).
        self.on_dead_letter = on_dead_letter

    def _dead_lettered(self, item: dict[str, Any], now: datetime) -> Run:
        if self.on_dead_letter is not None:
            try:
                self.on_dead_letter(item, now)
            except Exception:  # the notify_pending mark stays: the sweeper delivers it later
                run = f"{item.get('job_id')}.{item.get('run_key')}"
                logger.exception("dead-letter listener failed for run %s", run)
        return Run.from_item(item)

    # --- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _key(run_id: str) -> dict[str, str]:
        job_id, run_key = parse_run_id(run_id)
        return {"job_id": job_id, "run_key": run_key}

    def _update(
        self, run_id: str, update: str, condition: str, values: dict, names: dict | None = None
    ) -> dict:
        """Metered UpdateItem returning the new item; raises ``_Rejected`` carrying the stored item
        when the condition fails (DynamoDB returns it with the failure: no extra read)."""
        try:
            return self.dynamo.update(
                self.table,
                self._key(run_id),
                update,
                condition=condition,
                names={"#state": "state", **(names or {})},
                values=values,
            )
        except ConditionFailed as failed:
            raise _Rejected(failed.existing) from None

    def get(self, run_id: str) -> Run:
        """Read a run by id (strongly consistent); :class:`NotFoundError` if absent."""
        item = self.get_item(run_id)
        if item is None:
            raise NotFoundError(f"run {run_id} not found")
        return Run.from_item(item)

    def get_item(self, run_id: str) -> dict[str, Any] | None:
        """The raw item (with attributes the model does not carry, e.g. the dead-letter message)."""
        return self.dynamo.get(self.table, self._key(run_id), consistent=True)

    # --- claim -----------------------------------------------------------------------------------

    def claim(
        self,
        run_id: str,
        attempt: int,
        owner: str,
        now: datetime,
        lease_seconds: float,
        token: str | None = None,
        binding: Binding | None = None,
    ) -> Claim:
        """Take the run for ``attempt`` (the attempt the delivery names), with a lease until
        ``now + lease_seconds``.

        ``token`` is the delivery's send token: when given, the run must carry the same ``send_token``
        (or none, a run written before tokens existed), else the delivery is STALE — an older message
        of the run, superseded by a newer send (a revive after a pause, a sweeper re-send); it is
        acknowledged and dropped, so only the newest message of a run executes. A message without a
        token is not checked.

        - queued/retrying with ``attempt - 1`` done: claimed (one conditional write).
        - running and handed back (:meth:`hand_back`): claimed again for the same attempt number.
        - running with an expired lease: taken over as attempt ``current + 1`` (the old attempt is
          recorded ``lost``), or EXHAUSTED if that would exceed ``max_attempts``.
        - running with a live lease: BUSY. Terminal: FINISHED. Older attempt: STALE. No item: MISSING.

        ``binding`` (decision 0048): the claim writes ``handler`` and binds ``handler_version``
        (``if_not_exists``: set once, by the first attempt's claim), and the attempt entry records the
        handler, the version and the code version. A run already bound to another version is claimed
        for that one (a second conditional write; the attempt entry says which version ran).
        """
        lease_until = to_iso(now + timedelta(seconds=lease_seconds))
        binding = binding or Binding()
        entry = [_entry(attempt, now, binding)]
        prev_cond = "attempt = :prev" if attempt > 1 else "(attribute_not_exists(attempt) OR attempt = :prev)"
        token_values = {":tok": token} if token is not None else {}
        if token is not None:
            prev_cond += f" AND {_TOKEN_MATCHES}"
        bind, bind_cond, bind_values, bind_names = _bind(binding)
        try:
            item = self._update(
                run_id,
                "SET #state = :running, attempt = :a, lease_until = :lu, lease_owner = :o, "
                f"started_at = if_not_exists(started_at, :now), {bind}"
                "attempts = list_append(if_not_exists(attempts, :empty), :entry) "
                "REMOVE retry_at, progress, waiting_for, waiting_until",
                f"#state IN (:queued, :retrying) AND {prev_cond}{bind_cond}",
                {
                    **bind_values,
                    ":running": "running",
                    ":queued": "queued",
                    ":retrying": "retrying",
                    ":a": attempt,
                    ":prev": attempt - 1,
                    ":lu": lease_until,
                    ":o": owner,
                    ":now": to_iso(now),
                    ":empty": [],
                    ":entry": entry,
                    **token_values,
                },
                bind_names,
            )
            return Claim(ClaimStatus.CLAIMED, Run.from_item(item), item, attempt)
        except _Rejected as rejected:
            old = rejected.item
        bound = _bound_elsewhere(old, binding)
        if bound is not None:  # bound to another version by an earlier attempt: claim for that one
            again = replace(binding, version=bound)
            return self.claim(run_id, attempt, owner, now, lease_seconds, token, again)
        return self._after_rejected_claim(run_id, attempt, old, owner, now, lease_until, token, binding)

    def _after_rejected_claim(
        self,
        run_id: str,
        attempt: int,
        old: dict | None,
        owner: str,
        now: datetime,
        lease_until: str,
        token: str | None = None,
        binding: Binding | None = None,
    ) -> Claim:
        if old is None:
            return Claim(ClaimStatus.MISSING)
        run = Run.from_item(old)
        if run.state not in ACTIVE_RUN_STATES:
            return Claim(ClaimStatus.FINISHED, run, old, run.attempt)
        ahead = run.state is RunState.RUNNING and run.attempt == attempt - 1  # a retry racing its mark
        if token is not None and run.send_token not in (None, token) and not ahead:
            return Claim(ClaimStatus.STALE, run, old, run.attempt, superseded=True)
        if run.state is not RunState.RUNNING:
            return Claim(ClaimStatus.STALE, run, old, run.attempt)
        if run.lease_until is not None and run.lease_until > now:
            return Claim(ClaimStatus.BUSY, run, old, run.attempt)
        if old.get(HANDED_BACK) == run.attempt:  # given up by a stopping worker: the same attempt again
            return self._resume(run, old, owner, now, lease_until, binding or Binding())
        if run.attempt + 1 > run.max_attempts:
            return Claim(ClaimStatus.EXHAUSTED, run, old, run.attempt)
        return self._take_over(run, old, owner, now, lease_until, binding or Binding())

    def _take_over(
        self, run: Run, old: dict, owner: str, now: datetime, lease_until: str, binding: Binding
    ) -> Claim:
        """The expired owner's attempt recorded ``lost`` and a new one started, for the version the
        run is bound to (a run claimed before versions existed is bound now, as a first claim would)."""
        new_attempt = run.attempt + 1
        if run.handler_version is not None:
            binding = replace(binding, handler=run.handler or binding.handler, version=run.handler_version)
        last = len(run.attempts) - 1
        # The new entry is SET at the index after the last (SET past a list's end appends): DynamoDB
        # refuses `attempts = list_append(...)` beside `attempts[i].outcome` in one update ("Two
        # document paths overlap"), which moto lets through (decision 0043).
        if last >= 0:
            append = (
                f"attempts[{last + 1}] = :one, "
                f"attempts[{last}].outcome = :lost, attempts[{last}].finished_at = :now"
            )
        else:
            append = "attempts = list_append(attempts, :entry)"
        entry = _entry(new_attempt, now, binding)
        bind, _, bind_values, bind_names = _bind(binding)
        try:
            item = self._update(
                run.id,
                f"SET {bind}attempt = :a, lease_until = :lu, lease_owner = :o, {append}",
                "#state = :running AND attempt = :cur AND lease_until = :old_lease AND lease_until < :now",
                {
                    **bind_values,
                    ":running": "running",
                    ":a": new_attempt,
                    ":cur": run.attempt,
                    ":old_lease": old.get("lease_until", ""),
                    ":lu": lease_until,
                    ":o": owner,
                    ":now": to_iso(now),
                    **({":one": entry, ":lost": "lost"} if last >= 0 else {":entry": [entry]}),
                },
                bind_names,
            )
        except _Rejected as rejected:  # someone else moved first: classify what they left
            return _moved_on(rejected.item)
        return Claim(ClaimStatus.CLAIMED, Run.from_item(item), item, new_attempt, took_over=True)

    def _resume(
        self, run: Run, old: dict, owner: str, now: datetime, lease_until: str, binding: Binding
    ) -> Claim:
        """Claim a handed-back run (:meth:`hand_back`) for the same attempt number: a new entry for it
        (what runs it now), the lease to ``owner``; no attempt used, nothing recorded lost."""
        if run.handler_version is not None:
            binding = replace(binding, handler=run.handler or binding.handler, version=run.handler_version)
        entry = _entry(run.attempt, now, binding)
        bind, _, bind_values, bind_names = _bind(binding)
        try:
            item = self._update(
                run.id,
                f"SET {bind}lease_until = :lu, lease_owner = :o, "
                f"attempts[{len(run.attempts)}] = :one REMOVE {HANDED_BACK}",
                f"#state = :running AND attempt = :cur AND {HANDED_BACK} = :cur "
                "AND attribute_not_exists(lease_owner)",
                {
                    **bind_values,
                    ":running": "running",
                    ":cur": run.attempt,
                    ":lu": lease_until,
                    ":o": owner,
                    ":one": entry,
                },
                bind_names,
            )
        except _Rejected as rejected:  # another worker resumed it first (or it moved on): classify
            return _moved_on(rejected.item)
        return Claim(ClaimStatus.CLAIMED, Run.from_item(item), item, run.attempt)

    # --- waiting for a limit (jobsched.services.limits) -----------------------------------------

    def mark_waiting(self, run_id: str, attempt: int, reason: str, now: datetime, until: datetime) -> str:
        """Record that the delivery of ``attempt`` waits for ``reason`` (``concurrency:<key>``,
        ``rate:<key>``) until about ``until``: ``waiting_for``, ``waiting_until`` (the sweeper leaves
        the run alone until then), ``waits`` + 1, ``first_waited_at`` and ``limit_wait_<attempt>`` (the
        first wait of this attempt: the run's phases, decision 0064). One conditional write, no
        attempt used. Returns ``waiting``, or the run's state when it is not waiting for this attempt
        (``missing``, a terminal state: the delivery has nothing left to do; ``running``: a takeover)."""
        try:
            self._update(
                run_id,
                "SET waiting_for = :w, waiting_until = :u, "
                "first_waited_at = if_not_exists(first_waited_at, :now), "
                "#lw = if_not_exists(#lw, :now) ADD waits :one",
                "#state IN (:queued, :retrying) AND (attribute_not_exists(attempt) OR attempt = :prev)",
                {
                    ":w": reason,
                    ":u": to_iso(until),
                    ":now": to_iso(now),
                    ":one": 1,
                    ":queued": "queued",
                    ":retrying": "retrying",
                    ":prev": attempt - 1,
                },
                {"#lw": limit_wait_attribute(attempt)},
            )
        except _Rejected as rejected:
            if rejected.item is None:
                return "missing"
            return str(rejected.item.get("state"))
        return "waiting"

    # --- while running ---------------------------------------------------------------------------

    _FENCE = "#state = :running AND attempt = :a AND lease_owner = :o"

    def heartbeat(
        self, run_id: str, attempt: int, owner: str, now: datetime, lease_seconds: float, progress: Any = None
    ) -> bool:
        """Extend the lease (and record progress); return ``cancel_requested``. Raises
        :class:`LeaseLostError` if the attempt is no longer ours."""
        update = "SET lease_until = :lu" + (", progress = :p" if progress is not None else "")
        values: dict[str, Any] = {
            ":running": "running",
            ":a": attempt,
            ":o": owner,
            ":lu": to_iso(now + timedelta(seconds=lease_seconds)),
        }
        if progress is not None:
            values[":p"] = progress
        try:
            item = self._update(run_id, update, self._FENCE, values)
        except _Rejected as rejected:
            raise LeaseLostError(_lost_message(run_id, attempt, rejected.item)) from None
        return bool(item.get("cancel_requested", False))

    def cancel_flags(self, run_ids: Sequence[str]) -> set[str]:
        """Which of the runs carry ``cancel_requested``: one strongly consistent BatchGetItem of that
        attribute (and the key) per 100 runs. DynamoDB bills it per item, like that many GetItems (1
        read unit for a run item under 4 KB). Not metered here: the caller records each run's read
        with :meth:`record_flag_read` in that run's context, so usage per tenant stays exact."""
        keys = [self._key(run_id) for run_id in run_ids]
        items = self.dynamo.batch_get(
            self.table,
            keys,
            consistent=True,
            attributes=("job_id", "run_key", "cancel_requested"),
            metered=False,
        )
        return {f"{i['job_id']}.{i['run_key']}" for i in items if i.get("cancel_requested")}

    def record_flag_read(self, *, request: bool) -> None:
        """Meter one run's share of a :meth:`cancel_flags` batch: 1 read unit (a projected read is
        billed as the whole item: the unit minimum for items up to 4 KB), and the request itself when
        ``request`` (the first run of each batch)."""
        self.dynamo.meter.record_dynamodb(
            "BatchGetItem", rcu=read_units(0, True), table=self.table, requests=int(request)
        )

    # --- endings ---------------------------------------------------------------------------------

    def _finish(self, claim: Claim, owner: str, sets: list[str], values: dict, removes: list[str]) -> Run:
        """One fenced write that ends the current attempt: the given SETs, the attempt's
        ``finished_at``/``outcome``, and the lease removed."""
        return Run.from_item(self._finish_item(claim, owner, sets, values, removes))

    def _finish_item(
        self, claim: Claim, owner: str, sets: list[str], values: dict, removes: list[str]
    ) -> dict[str, Any]:
        assert claim.run is not None
        i = claim.index
        sets = [*sets, f"attempts[{i}].finished_at = :now", f"attempts[{i}].outcome = :outcome"]
        update = "SET " + ", ".join(sets) + " REMOVE " + ", ".join(["lease_until", "lease_owner", *removes])
        names = {n: n[1:] for n in ("#error", "#output") if n in update}
        values = {":running": "running", ":a": claim.attempt, ":o": owner, **values}
        try:
            item = self._update(claim.run.id, update, self._FENCE, values, names)
        except _Rejected as rejected:
            raise LeaseLostError(_lost_message(claim.run.id, claim.attempt, rejected.item)) from None
        return item

    def succeed(
        self, claim: Claim, owner: str, now: datetime, output: Any = None, output_ref: str | None = None
    ) -> Run:
        """running -> succeeded with the output inline or by reference (fenced)."""
        sets = ["#state = :succeeded", "finished_at = :now"]
        values: dict[str, Any] = {":succeeded": "succeeded", ":now": to_iso(now), ":outcome": "succeeded"}
        removes = ["progress", "#error", "output", "output_ref"]
        if output_ref is not None:
            sets.append("output_ref = :ref")
            values[":ref"] = output_ref
            removes.remove("output_ref")
        elif output is not None:
            sets.append("#output = :out")
            values[":out"] = output
            removes.remove("output")
        removes = ["#output" if r == "output" else r for r in removes]
        return self._finish(claim, owner, sets, values, removes)

    def retrying(
        self,
        claim: Claim,
        owner: str,
        now: datetime,
        retry_at: datetime,
        error: str,
        token: str | None = None,
    ) -> Run:
        """running -> retrying until ``retry_at`` (fenced); the error is kept on the attempt, and
        ``token`` (the retry message's) becomes the run's ``send_token``."""
        assert claim.run is not None
        i = claim.index
        sets = ["#state = :retrying", "retry_at = :retry_at", "#error = :err", f"attempts[{i}].#error = :err"]
        values = {":retrying": "retrying", ":retry_at": to_iso(retry_at), ":err": error, ":now": to_iso(now)}
        values[":outcome"] = "retrying"
        if token is not None:
            sets.append("send_token = :tok")
            values[":tok"] = token
        return self._finish(claim, owner, sets, values, ["progress"])

    def dead_letter(
        self, claim: Claim, owner: str, now: datetime, error: str, reason: str, message: str | None
    ) -> Run:
        """running -> failed and into the dead-letter index (fenced). ``message`` (the delivery's job
        snapshot and payload, as its JSON body) is kept so the dead letter can be replayed without the job.
        A replay's pending marker left on the run (its last write not done yet) is removed, so the new
        dead letter is listed and that late write cannot take it out of the index."""
        assert claim.run is not None
        i = claim.index
        sets = [
            "#state = :failed",
            "finished_at = :now",
            "#error = :err",
            f"attempts[{i}].#error = :err",
            "dl_tenant = :tenant",
            "dl_at = :now",
            "dl_reason = :reason",
            f"{NOTIFY_PENDING} = :now",
        ]
        values: dict[str, Any] = {
            ":failed": "failed",
            ":now": to_iso(now),
            ":err": error,
            ":tenant": claim.run.tenant,
            ":reason": reason,
            ":outcome": "failed",
        }
        if message is not None:
            sets.append("dl_message = :msg")
            values[":msg"] = message
        removes = ["progress", *_REPLAY_MARKERS, *NOTIFY_STATE]
        return self._dead_lettered(self._finish_item(claim, owner, sets, values, removes), now)

    def cancelled(self, claim: Claim, owner: str, now: datetime) -> Run:
        """running -> cancelled after the handler saw the flag (fenced)."""
        sets = ["#state = :cancelled", "finished_at = :now"]
        values = {":cancelled": "cancelled", ":now": to_iso(now), ":outcome": "cancelled"}
        return self._finish(claim, owner, sets, values, ["progress"])

    def skip_unstarted(self, run_id: str, token: str | None, now: datetime, reason: str) -> Run | None:
        """queued -> skipped with ``skip_reason = reason``, before the run's first attempt (the worker's
        spend cap, decision 0062): conditional on the run being ``queued`` with no attempt begun and,
        with a ``token``, carrying the delivery's send token (a stale message skips nothing). None when
        the condition failed: the delivery goes on to the claim, which answers it as usual."""
        values: dict[str, Any] = {
            ":queued": "queued",
            ":skipped": "skipped",
            ":now": to_iso(now),
            ":r": reason,
        }
        condition = "#state = :queued AND (attribute_not_exists(attempt) OR attempt = :zero)"
        values[":zero"] = 0
        if token is not None:
            condition += f" AND {_TOKEN_MATCHES}"
            values[":tok"] = token
        try:
            item = self._update(
                run_id,
                "SET #state = :skipped, skip_reason = :r, finished_at = :now "
                "REMOVE waiting_for, waiting_until",
                condition,
                values,
            )
        except _Rejected:
            return None
        return Run.from_item(item)

    def hand_back(self, claim: Claim, owner: str, now: datetime) -> Run:
        """Give the run up without using its attempt (a worker that stops before the run ends,
        decision 0052): one write fenced like every other (``running``, the attempt, ``owner``) that
        ends the lease (``lease_until = now``, no owner), records this entry ``handed_back`` and marks
        the run ``handed_back = <attempt>``. The next delivery of the run claims it again for the same
        attempt number (:meth:`claim`), not as a takeover: no attempt used, no ``lost`` entry, no error.
        Every later write of ``owner`` for this attempt is refused (:class:`LeaseLostError`), and so is
        this one when the attempt is no longer ``owner``'s."""
        assert claim.run is not None
        i = claim.index
        values = {
            ":running": "running",
            ":a": claim.attempt,
            ":o": owner,
            ":now": to_iso(now),
            ":outcome": "handed_back",
        }
        update = (
            f"SET lease_until = :now, {HANDED_BACK} = :a, "
            f"attempts[{i}].finished_at = :now, attempts[{i}].outcome = :outcome REMOVE lease_owner"
        )
        try:
            item = self._update(claim.run.id, update, self._FENCE, values)
        except _Rejected as rejected:
            raise LeaseLostError(_lost_message(claim.run.id, claim.attempt, rejected.item)) from None
        return Run.from_item(item)

    def fail_unclaimed(self, run: Run, now: datetime, error: str, reason: str, message: str | None) -> Run:
        """Dead-letter a run nobody holds (an exhausted takeover, a poison message): conditional on
        the state and attempt read, so it cannot overwrite a concurrent owner."""
        values: dict[str, Any] = {
            ":failed": "failed",
            ":now": to_iso(now),
            ":err": error,
            ":tenant": run.tenant,
            ":reason": reason,
            ":cur": run.attempt,
            ":st": str(run.state),
        }
        sets = [
            "#state = :failed",
            "finished_at = :now",
            "#error = :err",
            "dl_tenant = :tenant",
            "dl_at = :now",
            "dl_reason = :reason",
            f"{NOTIFY_PENDING} = :now",
        ]
        if message is not None:
            sets.append("dl_message = :msg")
            values[":msg"] = message
        try:
            item = self._update(
                run.id,
                "SET "
                + ", ".join(sets)
                + " REMOVE lease_until, lease_owner, progress, retry_at, "
                + ", ".join([*_REPLAY_MARKERS, *NOTIFY_STATE]),
                "#state = :st AND (attribute_not_exists(attempt) OR attempt = :cur)",
                values,
                {"#error": "error"},
            )
        except _Rejected as rejected:
            raise ConflictError(
                f"run {run.id} changed while being dead-lettered: {_state_of(rejected.item)}"
            ) from None
        return self._dead_lettered(item, now)


def _moved_on(item: dict[str, Any] | None) -> Claim:
    """What a claim found when another writer moved the run first (a takeover or resume refused):
    still running (theirs now) BUSY, queued or retrying STALE, ended FINISHED, gone MISSING."""
    if item is None:
        return Claim(ClaimStatus.MISSING)
    again = Run.from_item(item)
    status = ClaimStatus.BUSY if again.state is RunState.RUNNING else ClaimStatus.FINISHED
    if again.state in (RunState.QUEUED, RunState.RETRYING):
        status = ClaimStatus.STALE
    return Claim(status, again, item, again.attempt)


def _entry(attempt: int, now: datetime, binding: Binding) -> dict[str, Any]:
    """A new attempt's entry: its number, start, and what runs it (fields that are None left out)."""
    entry: dict[str, Any] = {"attempt": attempt, "started_at": to_iso(now)}
    ran_by = {
        "handler": binding.handler,
        "handler_version": binding.version,
        "code_version": binding.code_version,
    }
    return entry | {k: v for k, v in ran_by.items() if v is not None}


def _bind(binding: Binding) -> tuple[str, str, dict[str, Any], dict[str, str]]:
    """The claim's binding clauses: SET (ending ``, ``), condition (``AND ...``), values and names.

    The condition (unbound, or bound to this version) lets :meth:`AttemptStore.claim` tell a run bound
    to another version from its other refusals; ``if_not_exists`` keeps the binding set once."""
    if binding.handler is None or binding.version is None:
        return "", "", {}, {}
    return (
        "#handler = if_not_exists(#handler, :h), handler_version = if_not_exists(handler_version, :hv), ",
        " AND (attribute_not_exists(handler_version) OR handler_version = :hv)",
        {":h": binding.handler, ":hv": binding.version},
        {"#handler": "handler"},
    )


def _bound_elsewhere(item: dict[str, Any] | None, binding: Binding) -> int | None:
    """The version a refused claim's run is bound to, when that alone could explain the refusal: the
    run is claimable (queued or retrying) and bound to another version than ``binding``'s."""
    if item is None or binding.handler is None or binding.version is None:
        return None
    bound = item.get("handler_version")
    claimable = item.get("state") in (str(RunState.QUEUED), str(RunState.RETRYING))
    return int(bound) if claimable and bound is not None and int(bound) != binding.version else None


#: The claim condition that the delivery's token (``:tok``) is the run's current one.
_TOKEN_MATCHES = "(attribute_not_exists(send_token) OR send_token = :tok)"

#: The attempt a stopping worker handed back (:meth:`AttemptStore.hand_back`): the next claim resumes it.
HANDED_BACK = "handed_back"

#: A replay's pending marker (see :mod:`jobsched.services.runs`): when the replay began, and the message it
#: sends. A new dead letter removes it.
REPLAY_PENDING = "replay_pending_at"
REPLAY_MESSAGE = "replay_message"
_REPLAY_MARKERS = (REPLAY_PENDING, REPLAY_MESSAGE)

#: The dead-letter notification's outbox (:mod:`jobsched.services.notifications`): the mark a dead
#: letter sets (its ``dl_at``), the sender's lease on it, the tries so far, and the outcome once done.
NOTIFY_PENDING = "notify_pending"
NOTIFY_LEASE = "notify_lease"
NOTIFY_TRIES = "notify_tries"
NOTIFIED = "notified"
#: What a new dead letter clears of the previous one's notification (it owes a notification of its own).
NOTIFY_STATE = (NOTIFY_LEASE, NOTIFY_TRIES, NOTIFIED)


class _Rejected(Exception):
    def __init__(self, item: dict[str, Any] | None):
        super().__init__("condition failed")
        self.item = item


def _state_of(item: dict[str, Any] | None) -> str:
    if item is None:
        return "the run no longer exists"
    return f"state {item.get('state')}, attempt {item.get('attempt')}, owner {item.get('lease_owner')}"


def _lost_message(run_id: str, attempt: int, item: dict[str, Any] | None) -> str:
    return f"attempt {attempt} of run {run_id} is no longer ours ({_state_of(item)})"
