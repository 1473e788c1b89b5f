"""Operations on one run: get, output, cancel, and retry/replay a failed run.

Cancel: a queued or retrying run is cancelled at once (a conditional transition; the message still
in SQS later finds the run finished and is acknowledged); a running run gets ``cancel_requested``,
which the worker's heartbeat reads: the handler sees ``ctx.cancelled`` and stops at a safe point,
or finishes, and either way the run ends ``cancelled`` (its result is ignored).

Replay (also "retry a failed run") takes three steps, so that a crash between any two of them
loses nothing (guarantee 4):

1. ``failed -> queued`` with a fresh attempt budget, its dead-letter notification state removed (a
   notification still pending is not sent: someone has acted on the dead letter; if the replay fails
   again, that new dead letter owes a notification of its own), an optional corrected payload (kept as
   ``payload_override``) and a record appended to the run's ``replays``; conditional on the attempt
   read, so two concurrent replays cannot both send. The run *stays* in the sparse dead-letter index
   (``dl_tenant``, ``dl_at``) and gets ``replay_pending_at`` (when) and ``replay_message`` (the exact
   message of attempt ``n + 1``, with a fresh send token that step 1 records as the run's
   ``send_token``): listings leave such a run out. Before step 1 the run is recorded in the in-flight
   ledger (:mod:`jobsched.core.inflight`), which is how the sweeper finds it, whatever its tenant.
2. The message is sent. If the send fails, step 1 is undone (the failed state restored) and the
   caller gets a retryable error.
3. :func:`finish_replay` removes the index keys and the pending marker, conditional on the marker and
   ``dl_at`` it wrote, so it never removes a newer dead letter. If this write fails (throttling,
   crash), the sweeper does it later (:mod:`jobsched.services.sweeper`).

With a retention, step 1 also moves the run's expiry (the Runs table TTL, ``expires_at``) to the
replay's instant + retention, and records the run in its tenant's feed again with that expiry
before the write, so a replayed run is kept (and listed) for a whole retention from its replay.

A crash between 1 and 2 leaves the run ``queued`` with no message; the sweeper re-sends
``replay_message`` after its grace period. Duplicates are harmless: the worker's claim is
conditional on state and attempt.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime
from typing import Any

from jobsched.aws.attempts import NOTIFY_PENDING, NOTIFY_STATE, REPLAY_MESSAGE, REPLAY_PENDING
from jobsched.aws.errors import AwsError
from jobsched.aws.metering import ConditionFailed
from jobsched.aws.runs_store import new_send_token
from jobsched.core.errors import ConflictError, NotFoundError, PayloadTooLargeError, RetryableError
from jobsched.core.messages import MAX_PAYLOAD_BYTES, RunMessage, payload_size
from jobsched.core.models import Run, RunState, to_iso
from jobsched.core.run_records import outgoing_for
from jobsched.ports.stores import AttemptRecords, JobRecords, Outputs, RunQueue, RunRecords, SpendCap
from jobsched.ports.tables import Table

logger = logging.getLogger(__name__)

CANCEL_ATTEMPTS = 3

#: What step 3 removes.
_CLEARED_BY_FINISH = ("dl_tenant", "dl_at", "dl_reason", "dl_message", REPLAY_PENDING, REPLAY_MESSAGE)

#: What step 1 changes on the item and an undo puts back (or removes, when the item had none).
_RESTORED_ON_UNDO = (
    "dl_tenant",
    "dl_at",
    "dl_reason",
    "dl_message",
    "finished_at",
    "error",
    "retry_at",
    "discarded_at",
    "max_attempts",
    "replays",
    "payload_override",
    "send_token",
    "swept_at",
    "sweeps",
    "expires_at",
    NOTIFY_PENDING,
    *NOTIFY_STATE,
)


class RunService:
    """What the API and the CLI call for a single run. Stores and the run queues are injected."""

    def __init__(
        self,
        *,
        runs: RunRecords,
        attempts: AttemptRecords,
        jobs: JobRecords,
        outputs: Outputs,
        queues: RunQueue,
        budgets: SpendCap | None = None,
    ):
        self.runs = runs
        self.attempts = attempts
        self.jobs = jobs
        self.outputs = outputs
        self.queues = queues
        #: The tenants' spend caps (decision 0062): a replay of a capped tenant's run is refused.
        self.budgets = budgets

    def refuse_if_capped(self, tenant: str, now: datetime, operation: str) -> None:
        """:class:`BudgetExhaustedError` (409 ``budget_exhausted``) when the tenant is over its
        monthly budget; nothing to ask without spend caps."""
        if self.budgets is not None:
            self.budgets.refuse_if_capped(tenant, now, operation)

    def get(self, tenant: str, run_id: str) -> Run:
        """The run; another tenant's run is :class:`NotFoundError`, exactly like a missing one."""
        return self.runs.get(run_id, tenant)

    def output(self, tenant: str, run_id: str) -> Any:
        """The run's output, inline or fetched from S3 by its ``output_ref``."""
        run = self.get(tenant, run_id)
        if run.output_ref:
            return self.outputs.get_json(run.output_ref)
        return run.output

    def cancel(self, tenant: str, run_id: str, now: datetime) -> Run:
        """Cancel a queued/retrying run at once, flag a running one; :class:`ConflictError` if it ended."""
        for _ in range(CANCEL_ATTEMPTS):
            run = self.get(tenant, run_id)
            if run.state in (RunState.QUEUED, RunState.RETRYING):
                done = self.runs.transition(run, RunState.CANCELLED, now, reason="cancelled by request")
            elif run.state is RunState.RUNNING:
                done = self.runs.request_cancel(run)
            else:
                raise ConflictError(
                    f"run {run_id} is {run.state}; only queued, retrying or running runs cancel"
                )
            if done is not None:
                return done
        raise ConflictError(f"run {run_id} kept changing state; try again")

    def retry(self, tenant: str, run_id: str, now: datetime, payload: dict[str, Any] | None = None) -> Run:
        """Retry a failed run (the same as replaying its dead letter)."""
        return self.replay(tenant, run_id, now, payload=payload, action="retry")

    def replay(
        self,
        tenant: str,
        run_id: str,
        now: datetime,
        *,
        payload: dict[str, Any] | None = None,
        action: str = "replay",
    ) -> Run:
        """``failed -> queued`` and send attempt ``n + 1``; see the module docstring."""
        item = self.attempts.get_item(run_id)
        if item is None or item.get("tenant") != tenant:
            raise NotFoundError(f"run {run_id} not found")
        run = Run.from_item(item)
        if run.state is not RunState.FAILED:
            raise ConflictError(f"run {run_id} is {run.state}; only failed runs can be replayed")
        if payload is not None and payload_size(payload) > MAX_PAYLOAD_BYTES:
            raise PayloadTooLargeError(f"the corrected payload is over {MAX_PAYLOAD_BYTES} bytes")
        self.refuse_if_capped(tenant, now, f"{action} of run {run_id}")
        snapshot = self._snapshot(run, item, now)
        message = replace(
            snapshot,
            attempt=run.attempt + 1,
            due_at=now,
            pool=run.pool,  # the run's own pool: a snapshot from before runs had pools has none
            payload=payload if payload is not None else snapshot.payload,
            token=new_send_token(),  # recorded by step 1: an older message of the run cannot run it
        )
        record = {
            "action": action,
            "at": to_iso(now),
            "from_attempt": run.attempt,
            "payload_changed": payload is not None,
        }
        since = to_iso(now)
        dl_at = item.get("dl_at") or since  # a discarded run re-enters the index until step 3
        sets = [
            "#state = :queued",
            "max_attempts = :max",
            "replays = list_append(if_not_exists(replays, :empty), :record)",
            "dl_tenant = :tenant",
            "dl_at = :dl_at",
            f"{REPLAY_PENDING} = :since",
            f"{REPLAY_MESSAGE} = :msg",
            "send_token = :tok",
            "swept_at = :since",  # sent now: the sweeper gives this message its grace period
        ]
        values: dict[str, Any] = {
            ":queued": "queued",
            ":failed": "failed",
            ":a": run.attempt,
            ":max": run.attempt + snapshot.retry.max_attempts,
            ":empty": [],
            ":record": [record],
            ":tenant": tenant,
            ":dl_at": dl_at,
            ":since": since,
            ":msg": message.to_json(),
            ":tok": message.token,
        }
        if payload is not None:
            sets.append("payload_override = :p")
            values[":p"] = payload
        expiry = self.runs.expiry_after(now)
        if expiry is not None:
            sets.append("expires_at = :exp")
            values[":exp"] = expiry
        # In the in-flight ledger (the sweeper's reach), and with a retention in the feed again (its
        # entry's expiry moves with the run's), before the run is queued.
        queued = replace(run, state=RunState.QUEUED, expires_at=expiry or run.expires_at)
        self.runs.announce([queued], feed=expiry is not None, at=now)
        key = {"job_id": run.job_id, "run_key": run.run_key}
        try:
            updated = self.runs.dynamo.update(
                self.runs.table,
                key,
                "SET " + ", ".join(sets) + " REMOVE dl_reason, dl_message, finished_at, #error, retry_at, "
                "discarded_at, sweeps, " + ", ".join([NOTIFY_PENDING, *NOTIFY_STATE]),
                condition="#state = :failed AND attempt = :a",
                names={"#state": "state", "#error": "error"},
                values=values,
            )
        except ConditionFailed:
            raise ConflictError(f"run {run_id} changed while being replayed; read it and try again") from None
        try:
            self.queues.send_one(message, now)
        except Exception as exc:
            self._undo_replay(key, item, run.attempt, since)
            raise RetryableError(f"could not enqueue the replay of {run_id}: {exc}") from exc
        try:
            finished = finish_replay(self.runs.dynamo, self.runs.table, key, since, dl_at)
        except AwsError as exc:  # the message is on its way: the sweeper cleans up
            logger.warning("replay of run %s sent; its pending marker stays for the sweeper: %s", run_id, exc)
            finished = None
        if finished is None:  # no longer a dead letter either way: answer without the index keys
            finished = {k: v for k, v in updated.items() if k not in _CLEARED_BY_FINISH}
        return Run.from_item(finished)

    def _snapshot(self, run: Run, item: dict[str, Any], now: datetime) -> RunMessage:
        """The job snapshot the run failed with (kept on the dead letter), or the job as it is now."""
        if item.get("dl_message"):
            return RunMessage.from_json(item["dl_message"])
        job = self.jobs.get(run.tenant, run.job_id)
        return outgoing_for(job, run, now).message

    def _undo_replay(self, key: dict[str, Any], item: dict[str, Any], attempt: int, since: str) -> None:
        """Put back what step 1 changed (the failed state, its dead-letter attributes, budget, history
        and payload override), conditional on step 1's own marker."""
        sets, removes = ["#state = :failed"], [REPLAY_PENDING, REPLAY_MESSAGE]
        names = {"#state": "state"}
        values: dict[str, Any] = {":failed": "failed", ":queued": "queued", ":a": attempt, ":since": since}
        for i, name in enumerate(_RESTORED_ON_UNDO):
            names[f"#r{i}"] = name
            if name in item:
                sets.append(f"#r{i} = :r{i}")
                values[f":r{i}"] = item[name]
            else:
                removes.append(f"#r{i}")
        try:
            self.runs.dynamo.update(
                self.runs.table,
                key,
                "SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes),
                condition=f"#state = :queued AND attempt = :a AND {REPLAY_PENDING} = :since",
                names=names,
                values=values,
            )
        except ConditionFailed:
            pass


def finish_replay(
    dynamo: Table, table: str, key: dict[str, Any], since: str, dl_at: str
) -> dict[str, Any] | None:
    """Step 3 of a replay: take the run out of the dead-letter index and drop the pending marker,
    whatever its state now, conditional on the marker (``since``) and the ``dl_at`` step 1 kept, so a
    newer dead letter of the same run is never removed. The item as written, or None when the
    condition did not hold."""
    try:
        return dynamo.update(
            table,
            key,
            "REMOVE " + ", ".join(_CLEARED_BY_FINISH),
            condition=f"{REPLAY_PENDING} = :since AND dl_at = :dl_at",
            values={":since": since, ":dl_at": dl_at},
        )
    except ConditionFailed:
        return None
