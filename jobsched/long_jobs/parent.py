"""Fenced writes of a chunked run's own item (the *parent* run) while Step Functions drives it.

When the worker starts the execution it hands the run over: ``lease_owner`` becomes
``sfn:<execution name>`` and ``lease_until`` is pushed :data:`PARENT_LEASE_SECONDS` ahead. Every
later write (by whichever worker handles a chunk message) is conditional on
``state = running AND attempt = a AND lease_owner = sfn:<execution>``, the same fence
:class:`~jobsched.aws.attempts.AttemptStore` uses, so a message of an old execution (a run that
was replayed, cancelled or taken over) cannot touch the run. The endings reuse AttemptStore's writes.

Attributes beside the run model's: ``chunk_exec`` (execution name), ``chunk_handler``,
``chunk_timeout`` (seconds per step), ``chunks_done`` (number set of finished chunk indexes: the
atomic guard that counts each chunk once), and ``progress = {"done": d, "total": t}`` (``total`` is
null until the plan is known) that the API and the console show.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jobsched.aws.attempts import Claim, ClaimStatus
from jobsched.aws.metering import ConditionFailed
from jobsched.core.errors import LeaseLostError
from jobsched.core.models import Run, RunState, to_iso
from jobsched.ports.stores import AttemptRecords

#: How long a chunked run stays owned without news from any step. Each step's start and heartbeat
#: renews it; it must outlast a retry backoff (at most 300 s in the ASL) plus a queue backlog, else
#: the sweeper sees an expired lease and a worker re-checks the execution (see runner.start).
PARENT_LEASE_SECONDS = 900.0
OWNER_PREFIX = "sfn:"
_FENCE = "#state = :running AND attempt = :a AND lease_owner = :o"


def sfn_owner(execution: str) -> str:
    """The lease owner of a run driven by the execution called ``execution``."""
    return OWNER_PREFIX + execution


@dataclass
class Parent:
    """A parent run as read (or last written): the run model plus the raw item."""

    item: dict[str, Any]

    @property
    def run(self) -> Run:
        return Run.from_item(self.item)

    @property
    def execution(self) -> str | None:
        return self.item.get("chunk_exec")

    def owned_by(self, execution: str) -> bool:
        """True while the run is running under this execution."""
        return self.item.get("state") == str(RunState.RUNNING) and self.item.get("lease_owner") == sfn_owner(
            execution
        )

    @property
    def done(self) -> set[int]:
        return {int(i) for i in self.item.get("chunks_done", set())}

    @property
    def total(self) -> int | None:
        total = (self.item.get("progress") or {}).get("total")
        return int(total) if total is not None else None

    @property
    def timeout_seconds(self) -> float:
        return float(self.item.get("chunk_timeout", 300))

    def claim(self) -> Claim:
        """A claim of the current attempt, for AttemptStore's fenced endings."""
        run = self.run
        return Claim(ClaimStatus.CLAIMED, run, self.item, run.attempt)


class ParentStore:
    """Writes on parent runs through the AttemptStore's table and meter."""

    def __init__(self, attempts: AttemptRecords, lease_seconds: float = PARENT_LEASE_SECONDS):
        self.attempts = attempts
        self.lease_seconds = lease_seconds

    def read(self, run_id: str) -> Parent | None:
        item = self.attempts.get_item(run_id)
        return Parent(item) if item is not None else None

    def _update(
        self, parent: Parent, update: str, condition: str, values: dict, names: dict | None = None
    ) -> dict:
        run = parent.run
        fixed = {":a": run.attempt, **({":running": "running"} if ":running" in condition else {})}
        return self.attempts.dynamo.update(
            self.attempts.table,
            {"job_id": run.job_id, "run_key": run.run_key},
            update,
            condition=condition,
            names={"#state": "state", **(names or {})},
            values={**fixed, **values},
        )

    def _lease(self, now: datetime) -> str:
        return to_iso(now + timedelta(seconds=self.lease_seconds))

    def hand_over(
        self, claim: Claim, worker: str, execution: str, handler: str, timeout: float, now: datetime
    ) -> Parent:
        """Move the run from the claiming worker to the execution (fenced on the worker's claim).

        A run that this execution already drove (a takeover after an expired lease) keeps its
        progress and done set; otherwise both start over (first start, or a replay).
        """
        assert claim.item is not None
        same = claim.item.get("chunk_exec") == execution
        progress = "progress = if_not_exists(progress, :p0)" if same else "progress = :p0"
        update = (
            "SET lease_owner = :sfn, lease_until = :lu, chunk_exec = :x, chunk_handler = :h, "
            f"chunk_timeout = :t, {progress}" + ("" if same else " REMOVE chunks_done")
        )
        try:
            item = self._update(
                Parent(claim.item),
                update,
                _FENCE,
                {
                    ":o": worker,
                    ":sfn": sfn_owner(execution),
                    ":lu": self._lease(now),
                    ":x": execution,
                    ":h": handler,
                    ":t": int(timeout),
                    ":p0": {"done": 0, "total": None},
                },
            )
        except ConditionFailed as failed:
            raise LeaseLostError(
                f"run {claim.run.id if claim.run else '?'} changed before the hand-over: "
                f"{(failed.existing or {}).get('state')}"
            ) from None
        return Parent(item)

    def heartbeat(self, parent: Parent, execution: str, now: datetime) -> bool:
        """Renew the run's lease; return ``cancel_requested``. :class:`LeaseLostError` if not ours."""
        run = parent.run
        return self.attempts.heartbeat(run.id, run.attempt, sfn_owner(execution), now, self.lease_seconds)

    def set_total(self, parent: Parent, execution: str, total: int, now: datetime) -> None:
        """Record the number of chunks the plan produced (progress ``0/total``)."""
        try:
            self._update(
                parent,
                "SET progress.#t = :n, lease_until = :lu",
                _FENCE,
                {":o": sfn_owner(execution), ":n": total, ":lu": self._lease(now)},
                {"#t": "total"},
            )
        except ConditionFailed as failed:
            raise LeaseLostError(f"run {parent.run.id} is no longer driven by {execution}") from failed

    def count_done(self, parent: Parent, execution: str, index: int, now: datetime) -> bool:
        """Add chunk ``index`` to the done set and one to ``progress.done``, atomically and once.

        False when the chunk was already counted (a redelivery); :class:`LeaseLostError` when the
        run is no longer driven by this execution.
        """
        try:
            self._update(
                parent,
                "SET progress.#d = progress.#d + :one, lease_until = :lu ADD chunks_done :set",
                f"{_FENCE} AND NOT contains(chunks_done, :i)",
                {
                    ":o": sfn_owner(execution),
                    ":one": 1,
                    ":lu": self._lease(now),
                    ":set": {index},
                    ":i": index,
                },
                {"#d": "done"},
            )
        except ConditionFailed as failed:
            stored = Parent(failed.existing) if failed.existing else None
            if stored is not None and stored.owned_by(execution) and index in stored.done:
                return False
            raise LeaseLostError(f"run {parent.run.id} is no longer driven by {execution}") from None
        return True

    def note_error(self, parent: Parent, execution: str, error: str) -> None:
        """Keep a step's failure on the running run (the API shows it; the dead letter reuses it when
        Step Functions does not pass the cause on). A run no longer ours is left alone."""
        try:
            self._update(
                parent,
                "SET #error = :err",
                _FENCE,
                {":o": sfn_owner(execution), ":err": error},
                {"#error": "error"},
            )
        except ConditionFailed:
            pass

    # --- endings (AttemptStore's fenced writes, with the execution as the owner) -----------------

    def succeed(
        self, parent: Parent, execution: str, now: datetime, output: Any = None, output_ref: str | None = None
    ) -> Run:
        """running -> succeeded with the output; progress is kept as ``total/total``."""
        claim = parent.claim()
        run = self.attempts.succeed(claim, sfn_owner(execution), now, output=output, output_ref=output_ref)
        total = parent.total if parent.total is not None else len(parent.done)
        progress = {"done": total, "total": total}
        try:  # AttemptStore.succeed drops progress (a plain run's progress ends with it); keep ours
            self._update(
                parent,
                "SET progress = :p",
                "#state = :succeeded AND attempt = :a",
                {":p": progress, ":succeeded": "succeeded"},
            )
        except ConditionFailed:
            return run
        run.progress = progress
        return run

    def dead_letter(
        self, parent: Parent, execution: str, now: datetime, error: str, reason: str, message: str | None
    ) -> Run:
        """running -> failed, into the dead-letter index (replayable with ``message``)."""
        return self.attempts.dead_letter(parent.claim(), sfn_owner(execution), now, error, reason, message)

    def cancelled(self, parent: Parent, execution: str, now: datetime) -> Run:
        """running -> cancelled (the execution was stopped)."""
        return self.attempts.cancelled(parent.claim(), sfn_owner(execution), now)
