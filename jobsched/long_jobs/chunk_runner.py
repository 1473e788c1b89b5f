"""The worker side of chunked jobs: start a run's execution, answer the workflow's task messages.

:class:`ChunkRunner` is plugged into :class:`jobsched.services.worker.Worker` (``chunks=``);
the worker hands it

* a claimed run whose handler is a chunked job (:meth:`ChunkRunner.start`): it starts the Step
  Functions execution named after the run (a second start of the same run is refused by Step
  Functions, so a duplicate delivery never starts a second execution), hands the run over to the
  execution (``lease_owner = sfn:<execution>``, progress ``0/?``) and the message is acknowledged;
  the run then finishes through the workflow;
* every message whose ``kind`` is one of the workflow's (:meth:`ChunkRunner.handle`):
  ``chunk.plan`` -> plan, record the total, ``SendTaskSuccess({"chunks": [...]})``;
  ``chunk.run`` -> run the chunk (resuming from its checkpoint), store its output, count it once,
  ``SendTaskSuccess``; a chunk already done is answered at once without running it again;
  ``chunk.complete`` -> complete with the chunk outputs, the run ``succeeded``, ``SendTaskSuccess``;
  ``chunk.failed`` -> the run ``failed`` and dead-lettered.

A step runs under the run's timeout (bounded by the Lambda's time left) with a heartbeat thread that
sends ``SendTaskHeartbeat``, extends the message's visibility and renews the run's lease (reading the
cancel flag). Failures answer ``SendTaskFailure`` with :data:`RETRYABLE_ERROR` (the ASL retries it
with backoff) or :data:`~jobsched.long_jobs.asl.PERMANENT_ERROR` (no retry: the workflow records the
failure). A cancelled run stops its execution and ends ``cancelled``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobsched.aws.attempts import Claim
from jobsched.aws.errors import AwsRefused
from jobsched.aws.outputs import OutputStore, encode
from jobsched.aws.queues import change_visibility
from jobsched.aws.sizing import Meter
from jobsched.core.clock import Clock
from jobsched.core.errors import LeaseLostError, PermanentError
from jobsched.core.messages import V1_PAYLOAD_VERSION, RunMessage
from jobsched.core.models import RunState
from jobsched.long_jobs.asl import (
    KIND_COMPLETE,
    KIND_FAILED,
    KIND_PLAN,
    KIND_RUN,
    MESSAGE_KINDS,
    PLANNED_TRANSITIONS,
    TRANSITIONS_BY_KIND,
)
from jobsched.long_jobs.checkpoints import ChunkStore
from jobsched.long_jobs.chunked import (
    ChunkContext,
    ChunkedJob,
    chunked_handler_of,
    get_chunked,
)
from jobsched.long_jobs.parent import Parent, ParentStore
from jobsched.long_jobs.starter import ExecutionStarter
from jobsched.long_jobs.steps import StepResult, answer_failure, answer_success, run_step
from jobsched.ports.queues import SqsApi
from jobsched.ports.state_machine import StateMachine
from jobsched.ports.stores import AttemptRecords
from jobsched.runtime import observability as obs
from jobsched.services.deliveries import DEFAULT_REMAINING_SECONDS, Delivery
from jobsched.services.outcome import Outcome
from jobsched.targets.executor import error_info
from jobsched.targets.registry import lookup

logger = logging.getLogger(__name__)

#: The whole plan travels in the execution's state (256 KB limit with everything else).
MAX_PLAN_BYTES = 200_000
#: Seconds a task message waits when its run is still being handed over to the execution.
HANDOVER_WAIT_SECONDS = 5


@dataclass
class _Task:
    """One workflow task in hand: the job, its run, the execution and the message."""

    job: ChunkedJob
    parent: Parent
    name: str  # execution name
    arn: str  # execution ARN
    data: dict[str, Any]  # the message body
    timeout: float  # seconds the step may run
    visibility: tuple[str | None, str | None]  # (queue URL, receipt handle) of the message

    @property
    def token(self) -> str:
        return str(self.data["task_token"])


def chunk_kind(body: str) -> str | None:
    """The workflow message kind of an SQS body, or None for anything else (a run message)."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError):
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if kind in MESSAGE_KINDS else None


class ChunkRunner:
    """Starts executions and handles the workflow's messages; every dependency is injected: the stores,
    the SQS calls (``sqs``: the :class:`~jobsched.ports.queues.SqsApi` port, its visibility changes
    not metered) and the state machine (the :class:`~jobsched.ports.state_machine.StateMachine` port,
    :class:`jobsched.aws.step_functions.StepFunctions` in a deployment)."""

    def __init__(
        self,
        *,
        attempts: AttemptRecords,
        outputs: OutputStore,
        chunks: ChunkStore,
        sqs: SqsApi,
        stepfunctions: StateMachine,
        state_machine_arn: str,
        clock: Clock,
        owner: str,
        heartbeat_seconds: float = 20.0,
        safety_margin_seconds: float = 5.0,
        metrics: obs.MetricSink | None = None,
        queue_urls: Mapping[str, str] | None = None,
        meter: Meter | None = None,
    ):
        self.parents = ParentStore(attempts)
        #: Counts the execution's state transitions for the run's tenant (usage, decision 0059 amended).
        self.meter = meter
        self.outputs = outputs
        self.chunks = chunks
        self.sqs = sqs
        self.sfn = stepfunctions
        self.state_machine_arn = state_machine_arn
        self.clock = clock
        self.owner = owner
        self.heartbeat_seconds = heartbeat_seconds
        self.safety_margin_seconds = safety_margin_seconds
        self.metrics = metrics or obs.NullSink()
        #: The queue URLs by kind: an execution's chunk queue is the one of its run's pool
        #: (``long`` or ``container``; without it, the state machine's default, the long queue).
        self.starter = ExecutionStarter(
            self.parents, self.sfn, state_machine_arn, owner, self.metrics, queue_urls=queue_urls, meter=meter
        )

    # --- starting --------------------------------------------------------------------------------

    @staticmethod
    def accepts(body: str) -> bool:
        """True for a workflow message (``chunk.*``), False for a run message."""
        return chunk_kind(body) is not None

    @staticmethod
    def job_for(target: dict) -> ChunkedJob | None:
        """The chunked job a run's target names, or None for any other target."""
        return chunked_handler_of(target)

    def execution_arn(self, name: str) -> str:
        return self.starter.execution_arn(name)

    def start(self, msg: RunMessage, claim: Claim, job: ChunkedJob, now: datetime) -> Outcome:
        """Start (or find) the run's execution and hand the run over to it (see :mod:`.starter`)."""
        return self.starter.start(msg, claim, job, now)

    # --- workflow messages -----------------------------------------------------------------------

    def handle(
        self, delivery: Delivery, now: datetime, *, remaining_seconds: float = DEFAULT_REMAINING_SECONDS
    ) -> Outcome:
        """Handle one workflow message (see the module docstring)."""
        body, queue_url, receipt_handle = delivery.body, delivery.queue_url, delivery.receipt_handle
        data = json.loads(body)
        kind = data["kind"]
        arn = str(data["execution_id"])
        name = arn.rsplit(":", 1)[-1]
        run_id = data["run_id"] if "run_id" in data else data["run"]["run_id"]
        if delivery.receive_count in (None, 1):  # the task's state entered (not an SQS redelivery)
            self._transitions(TRANSITIONS_BY_KIND[kind], data)
        parent = self.parents.read(run_id)
        if kind == KIND_FAILED:
            return self._failed(parent, name, arn, data, now)
        gate = self._gate(parent, name, arn, kind, data, queue_url, receipt_handle)
        if gate is not None:
            return gate
        assert parent is not None
        try:
            if self.parents.heartbeat(parent, name, now):
                return self._cancel(parent, name, arn, now)
        except LeaseLostError:
            return Outcome("chunk_stale", run_id, detail={"kind": kind})
        budget = remaining_seconds - self.safety_margin_seconds
        timeout = min(parent.timeout_seconds, budget)
        if budget < min(parent.timeout_seconds, 60):
            _set_visibility(self.sqs, queue_url, receipt_handle, 0)
            return Outcome("no_time", run_id, defer=True, detail={"kind": kind})
        handler, version = str(parent.item.get("chunk_handler")), parent.run.handler_version
        job = get_chunked(handler, version)
        if job is None:
            at = f" version {version}" if version is not None else ""
            error = PermanentError(f"chunked job {handler!r}{at} is not registered here")
            answer_failure(self.sfn, data["task_token"], error)
            return Outcome("chunk_failed", run_id, detail={"kind": kind, "error": error.message})
        step = {KIND_PLAN: self._plan, KIND_RUN: self._chunk, KIND_COMPLETE: self._complete}[kind]
        try:
            return step(_Task(job, parent, name, arn, data, timeout, (queue_url, receipt_handle)))
        except LeaseLostError as lost:  # the run moved on (taken over, ended) while the step ran
            logger.warning("%s", lost.message)
            return Outcome("chunk_stale", run_id, detail={"kind": kind})

    def _gate(
        self, parent: Parent | None, name: str, arn: str, kind: str, data: dict, queue_url: Any, receipt: Any
    ) -> Outcome | None:
        """None when the run is driven by this execution; otherwise what to do with the message."""
        run_id = data.get("run_id") or data["run"]["run_id"]
        if parent is not None and parent.owned_by(name):
            return None
        running = parent is not None and parent.item.get("state") == str(RunState.RUNNING)
        if running and parent is not None and parent.execution in (None, name):
            # the worker that started the execution has not handed the run over yet: look again soon
            _set_visibility(self.sqs, queue_url, receipt, HANDOVER_WAIT_SECONDS)
            return Outcome("chunk_waiting", run_id, defer=True, detail={"kind": kind})
        if parent is not None and kind == KIND_COMPLETE and parent.execution == name:
            run = parent.run
            if run.state is RunState.SUCCEEDED:  # our completion was recorded, its answer was lost
                answer_success(self.sfn, data["task_token"], _result(run.output, run.output_ref))
                return Outcome("chunk_answered", run_id, detail={"kind": kind})
        self._stop(arn, "jobsched.Stale", "the run is not driven by this execution any more")
        return Outcome("chunk_stale", run_id, detail={"kind": kind})

    def _plan(self, task: _Task) -> Outcome:
        run = task.parent.run
        ctx = ChunkContext(run.id, run.job_id, run.tenant, task.name, task.timeout)
        result = self._run(lambda: task.job.plan(self._payload(task), ctx), ctx, task)
        if result.error is None and not _valid_plan(result.value):
            result.error = PermanentError(
                f"plan must return a JSON list of chunks under {MAX_PLAN_BYTES} bytes "
                "(descriptors such as ranges or keys, not the data)"
            )
        if (ended := self._ended(result, task, "plan")) is not None:
            return ended
        chunks = list(result.value)
        self.parents.set_total(task.parent, task.name, len(chunks), self.clock.now())
        if answer_success(self.sfn, task.token, {"chunks": chunks}):
            self._transitions(PLANNED_TRANSITIONS, task.data)
        return Outcome("chunk_planned", run.id, detail={"chunks": len(chunks)})

    def _chunk(self, task: _Task) -> Outcome:
        parent, name, run = task.parent, task.name, task.parent.run
        index = int(task.data["index"])
        record = {} if index in parent.done else self.chunks.get(name, index)
        if index in parent.done or record.get("done_at"):
            if index not in parent.done:  # done, but the count was lost (crash in between)
                self.parents.count_done(parent, name, index, self.clock.now())
            answer_success(self.sfn, task.token, {"index": index})
            return Outcome("chunk_already_done", run.id, detail={"index": index})

        def save(value: Any) -> None:
            self.chunks.save_checkpoint(name, index, value, self.clock.now())

        ctx = ChunkContext(
            run.id,
            run.job_id,
            run.tenant,
            name,
            task.timeout,
            index=index,
            total=int(task.data["total"]),
            checkpoint=record.get("checkpoint"),
            on_checkpoint=save,
        )
        result = self._run(lambda: task.job.run_chunk(task.data["chunk"], ctx), ctx, task)
        if (ended := self._ended(result, task, "chunk")) is not None:
            return ended
        finished = self.clock.now()
        inline, ref = result.value, None
        if len(encode(result.value)) > self.outputs.inline_limit:
            ref = self.outputs.put_payload(run.tenant, run.id, result.value, f"{name}-chunk-{index}-output")
            inline = None
        self.chunks.mark_done(name, index, finished, inline, ref)
        self.parents.count_done(parent, name, index, finished)
        answer_success(self.sfn, task.token, {"index": index})
        return Outcome("chunk_succeeded", run.id, detail={"index": index})

    def _complete(self, task: _Task) -> Outcome:
        run = task.parent.run
        total = len(task.data["run"].get("plan", {}).get("chunks", []))
        outputs = [
            self.outputs.get_json(r["output_ref"]) if r.get("output_ref") else r.get("output")
            for r in self.chunks.outputs(task.name, total)
        ]
        summary = {"chunks": total, "outputs": outputs}
        ctx = ChunkContext(run.id, run.job_id, run.tenant, task.name, task.timeout)
        result = self._run(lambda: task.job.complete(self._payload(task), ctx, summary), ctx, task)
        if (ended := self._ended(result, task, "complete")) is not None:
            return ended
        finished = self.clock.now()
        inline, ref = self.outputs.place_output(run.tenant, run.id, run.attempt, result.value)
        self.parents.succeed(task.parent, task.name, finished, output=inline, output_ref=ref)
        self.metrics.add(obs.RUNS_SUCCEEDED)
        answer_success(self.sfn, task.token, _result(inline, ref))
        return Outcome("succeeded", run.id, run.attempt, detail={"execution": task.name, "output_ref": ref})

    def _failed(self, parent: Parent | None, name: str, arn: str, data: dict, now: datetime) -> Outcome:
        run_id = data["run_id"]
        if parent is None or not parent.owned_by(name):
            return Outcome("chunk_stale", run_id, detail={"kind": KIND_FAILED})
        error = data.get("error") or {}
        cause = error.get("Cause") or parent.item.get("error") or "no cause given"
        text = f"{error.get('Error', 'error')}: {cause}"
        try:
            message = json.loads(self.sfn.describe_execution(arn)["input"])["message"]
            replayable = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
        except (AwsRefused, KeyError, ValueError):
            logger.warning("could not read the input of %s; the dead letter replays from the job", arn)
            replayable = None
        try:
            run = self.parents.dead_letter(parent, name, now, text[:4000], "chunk_failed", replayable)
        except LeaseLostError:
            return Outcome("chunk_stale", run_id, detail={"kind": KIND_FAILED})
        self.metrics.add(obs.RUNS_FAILED)
        self.metrics.add(obs.RUNS_DEAD_LETTERED)
        return Outcome("dead_lettered", run_id, run.attempt, detail={"reason": "chunk_failed", "error": text})

    # --- helpers ---------------------------------------------------------------------------------

    def _transitions(self, count: int, data: Mapping[str, Any]) -> None:
        """``count`` state transitions of the execution for the run's tenant (the message's)."""
        if self.meter is None:
            return
        tenant = data.get("tenant") or (data.get("run") or {}).get("tenant")
        self.meter.record_billed("sfn_transitions", count, tenant=str(tenant) if tenant else None)

    def _run(self, fn: Callable[[], Any], ctx: ChunkContext, task: _Task) -> StepResult:
        """Run one step with heartbeats that also keep the message invisible and the run leased."""
        cancel_seen = threading.Event()
        queue_url, receipt = task.visibility

        def renew() -> None:
            _set_visibility(self.sqs, queue_url, receipt, int(self.heartbeat_seconds * 3) + 30)
            if self.parents.heartbeat(task.parent, task.name, self.clock.now()):
                cancel_seen.set()
                ctx.cancel_event.set()

        return run_step(
            fn,
            sfn=self.sfn,
            task_token=task.token,
            renew=renew,
            interval_seconds=self.heartbeat_seconds,
            timeout_seconds=task.timeout,
            cancel_event=ctx.cancel_event,
            cancel_seen=cancel_seen,
        )

    def _ended(self, result: StepResult, task: _Task, what: str) -> Outcome | None:
        """None when the step succeeded; otherwise the outcome of a cancelled, lost or failed step."""
        run_id = task.parent.run.id
        if result.cancelled:
            return self._cancel(task.parent, task.name, task.arn, self.clock.now())
        if result.lost:
            return Outcome("chunk_lost", run_id, detail={"step": what})
        if result.error is not None:
            code = answer_failure(self.sfn, task.token, result.error)
            info = error_info(result.error)
            where = f"chunk {task.data['index']}" if "index" in task.data else what
            self.parents.note_error(task.parent, task.name, f"{where}: {info['type']}: {info['message']}")
            return Outcome("chunk_failed", run_id, detail={"step": what, "error": code, **_index(task.data)})
        return None

    def _cancel(self, parent: Parent, name: str, arn: str, now: datetime) -> Outcome:
        self._stop(arn, "jobsched.Cancelled", "the run was cancelled")
        try:
            self.parents.cancelled(parent, name, now)
        except LeaseLostError:
            return Outcome("chunk_stale", parent.run.id)
        self.metrics.add(obs.RUNS_CANCELLED)
        return Outcome("cancelled", parent.run.id, parent.run.attempt, detail={"execution": name})

    def _stop(self, arn: str, error: str, cause: str) -> None:
        if not self.sfn.stop_execution(arn, error, cause):  # already closed or unknown: nothing to stop
            logger.info("execution %s could not be stopped (already closed?)", arn)

    def _payload(self, task: _Task) -> Any:
        """The run's payload for the version the run is bound to, upgraded from the version it was
        written for (a ``v=1`` snapshot: version 1) and checked against that version's contract;
        :class:`PermanentError` (or a permanent ``ValidationError``) when it cannot be."""
        message = task.data["run"]["message"]
        payload = message.get("payload") if message.get("payload") is not None else {}
        if not isinstance(payload, dict):
            return payload
        written_for = V1_PAYLOAD_VERSION if message.get("v") == 1 else message.get("payload_version")
        registered = lookup(str(task.parent.item.get("chunk_handler")), task.parent.run.handler_version)
        return registered.payload_for(payload, written_for)


def _valid_plan(value: Any) -> bool:
    return isinstance(value, list | tuple) and len(encode(list(value))) <= MAX_PLAN_BYTES


def _result(output: Any, output_ref: str | None) -> dict:
    return {"output_ref": output_ref} if output_ref else {"output": output}


def _index(data: dict) -> dict:
    return {"index": data["index"]} if "index" in data else {}


def _set_visibility(sqs: Any, queue_url: str | None, receipt: str | None, seconds: int) -> None:
    if queue_url and receipt:
        try:
            change_visibility(sqs, queue_url, receipt, seconds)
        except AwsRefused:  # the message may be gone; the run's lease is what fences
            logger.warning("could not change the visibility of a chunk message", exc_info=True)
