"""Operations on one run: get, output, cancel, and retry/replay a failed run.

Cancel: a queued or retrying run is cancelled at once (a conditional transition; the message still
in SQS later finds the run finished and is acknowledged); a running run gets ``cancel_requested``,
which the worker's heartbeat reads: the handler sees ``ctx.cancelled`` and stops at a safe point,
or finishes, and either way the run ends ``cancelled`` (its result is ignored).

Replay (also "retry a failed run"): ``failed -> queued`` with a fresh attempt budget, an optional
corrected payload (kept as ``payload_override``) and a record appended to the run's ``replays``;
then the next attempt's message is sent. The state change comes first and is conditional on the
attempt read, so two concurrent replays cannot both send; if the send fails the change is undone
and the caller gets a retryable error.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from jobsched.aws.attempts import AttemptStore
from jobsched.aws.jobs_store import JobsStore
from jobsched.aws.metering import ConditionFailed
from jobsched.aws.outputs import OutputStore
from jobsched.aws.runs_store import RunsStore
from jobsched.core.errors import ConflictError, NotFoundError, PayloadTooLargeError, RetryableError
from jobsched.core.messages import MAX_PAYLOAD_BYTES, RunMessage, payload_size
from jobsched.core.models import Run, RunState, to_iso
from jobsched.dispatch import outgoing_for
from jobsched.work import send_run_message

CANCEL_ATTEMPTS = 3


class RunService:
    """What the API and the CLI call for a single run. Stores and the SQS client are injected."""

    def __init__(
        self,
        *,
        runs: RunsStore,
        attempts: AttemptStore,
        jobs: JobsStore,
        outputs: OutputStore,
        sqs: Any,
        queue_urls: dict[str, str] | Any,
    ):
        self.runs = runs
        self.attempts = attempts
        self.jobs = jobs
        self.outputs = outputs
        self.sqs = sqs
        self.queue_urls = queue_urls

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

    def retry(self, tenant: str, run_id: str, now: datetime, payload: dict | None = None) -> Run:
        """Retry a failed run (the same as replaying its dead letter)."""
        return self.replay(tenant, run_id, now, payload=payload, action="retry")

    def replay(
        self, tenant: str, run_id: str, now: datetime, *, payload: dict | None = None, action: str = "replay"
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
        snapshot = self._snapshot(run, item, now)
        message = replace(
            snapshot,
            attempt=run.attempt + 1,
            due_at=now,
            payload=payload if payload is not None else snapshot.payload,
            payload_ref=None if payload is not None else snapshot.payload_ref,
        )
        record = {
            "action": action,
            "at": to_iso(now),
            "from_attempt": run.attempt,
            "payload_changed": payload is not None,
        }
        sets = [
            "#state = :queued",
            "max_attempts = :max",
            "replays = list_append(if_not_exists(replays, :empty), :record)",
        ]
        values: dict[str, Any] = {
            ":queued": "queued",
            ":failed": "failed",
            ":a": run.attempt,
            ":max": run.attempt + snapshot.retry.max_attempts,
            ":empty": [],
            ":record": [record],
        }
        if payload is not None:
            sets.append("payload_override = :p")
            values[":p"] = payload
        key = {"job_id": run.job_id, "run_key": run.run_key}
        try:
            updated = self.runs.dynamo.update(
                self.runs.table,
                key,
                "SET " + ", ".join(sets) + " REMOVE dl_tenant, dl_at, dl_reason, dl_message, finished_at, "
                "#error, retry_at, discarded_at",
                condition="#state = :failed AND attempt = :a",
                names={"#state": "state", "#error": "error"},
                values=values,
            )
        except ConditionFailed:
            raise ConflictError(f"run {run_id} changed while being replayed; read it and try again") from None
        try:
            send_run_message(self.sqs, self.queue_urls[message.priority], message, now)
        except Exception as exc:
            self._undo_replay(key, item, run.attempt)
            raise RetryableError(f"could not enqueue the replay of {run_id}: {exc}") from exc
        return Run.from_item(updated)

    def _snapshot(self, run: Run, item: dict[str, Any], now: datetime) -> RunMessage:
        """The job snapshot the run failed with (kept on the dead letter), or the job as it is now."""
        if item.get("dl_message"):
            return RunMessage.from_json(item["dl_message"])
        job = self.jobs.get(run.tenant, run.job_id)
        return outgoing_for(job, run, now).message

    def _undo_replay(self, key: dict, item: dict[str, Any], attempt: int) -> None:
        restore = {k: item[k] for k in ("dl_tenant", "dl_at", "max_attempts", "replays") if k in item}
        sets = ["#state = :failed"] + [f"{k} = :{k}" for k in restore]
        values = {":failed": "failed", ":queued": "queued", ":a": attempt}
        values.update({f":{k}": v for k, v in restore.items()})
        try:
            self.runs.dynamo.update(
                self.runs.table,
                key,
                "SET " + ", ".join(sets),
                condition="#state = :queued AND attempt = :a",
                names={"#state": "state"},
                values={
                    ":failed": "failed",
                    ":queued": "queued",
                    ":a": attempt,
                    **{f":{k}": v for k, v in restore.items()},
                },
            )
        except ConditionFailed:
            pass
