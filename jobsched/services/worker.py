"""The worker service: one SQS delivery of a run in, one fenced outcome out.

``Worker.handle`` is what ``functions/worker`` (and the local mode's poller) calls per record, through
:class:`jobsched.services.deliveries.Deliveries` (the worker is its default
:class:`~jobsched.services.deliveries.DeliveryHandler`):

1. parse the message (a malformed one raises: SQS redrives it to the DLQ, the DLQ consumer records it);
2. a delivery that arrives before its due instant (a delay over SQS's 900 s cap) is re-sent with the
   rest of the delay and acknowledged; a first attempt of a tenant over its monthly budget (a message
   the dispatcher marked ``budgeted``) is recorded ``skipped``/``budget`` instead of starting
   (:mod:`jobsched.services.budget_skips`, decision 0062);
3. claim the run for the message's attempt (:meth:`AttemptStore.claim`): a finished or superseded run is
   acknowledged without doing anything (guarantee 2: a redelivery after a crash does nothing new); a run
   another worker holds is left in the queue; a run whose owner's lease expired is taken over. The
   claim binds the run to a handler version (decision 0048): the one the message pins or the run is
   bound to, else the newest this code registers; a run bound earlier keeps its version, and the
   attempt entry records the handler, the version and the deployment's code version;
4. run the target (the bound version, its payload upgraded from the message's ``payload_version``:
   a version this code lacks, or a payload it cannot upgrade, is a permanent failure naming it)
   under ``min(timeout, Lambda time left)`` with a heartbeat every third of the lease that extends
   the lease and the message's visibility, writes progress and reads the cancel flag,
   and, while the target runs, a cancel watch that reads only the flag every
   ``cancel_poll_seconds`` (1 s; one batched read for all the worker's running runs), so a
   cancellation reaches the handler within about a second;
5. record the outcome with a write fenced on the attempt: succeeded (output inline or in S3), cancelled,
   retrying (the next attempt is *sent first*, then the run is marked, so a crash in between leaves a
   message that finds the run and claims it; never a run waiting for a message that does not exist),
   or failed and dead-lettered (permanent error, or attempts used up).

A worker that must stop before its runs end (the container worker's graceful stop, decision 0052)
calls :meth:`Worker.hand_back`: each run it executes is given up with a fenced write that uses no
attempt (:meth:`AttemptStore.hand_back`), its handler's stop event (``ctx.cancelled``) is set, and the
delivery ends ``handed_back`` (deferred) whenever its handler returns, without another write.

Retry delays over 900 s are carried by the message itself: each delivery before ``due_at`` re-sends
itself with the remaining delay (step 2). That costs one SQS request per 15 minutes of backoff and no
DynamoDB write or index entry, where a "retry due" index would cost index writes on every retry.
"""

from __future__ import annotations

import contextvars
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from jobsched.aws.attempts import Claim, ClaimStatus
from jobsched.aws.runs_store import new_send_token
from jobsched.core.clock import Clock
from jobsched.core.errors import LeaseLostError, RetryableError
from jobsched.core.messages import RunMessage
from jobsched.core.retry import PERMANENT, RetryPolicy, backoff_delay, classify_error
from jobsched.ports.stores import AttemptRecords, Binding, Outputs, RunQueue
from jobsched.runtime import observability as obs
from jobsched.services.budget_skips import QueuedAheadCap
from jobsched.services.deliveries import DEFAULT_REMAINING_SECONDS, Delivery
from jobsched.services.limits import Admission, LimitGate, unlimited
from jobsched.services.outcome import Outcome, OutcomeStatus
from jobsched.targets.context import IdempotentEffects, JobContext
from jobsched.targets.executor import CancelBoard, Heartbeat, KeptThreads, error_info, execute_target
from jobsched.targets.registry import lookup, newest_version

logger = logging.getLogger(__name__)

#: Seconds of the Lambda's remaining time kept back for recording the outcome.
SAFETY_MARGIN_SECONDS = 5.0
#: A delivery up to this early is waited out in the worker, then run (``DelaySeconds`` is whole seconds,
#: rounded down: see :func:`jobsched.core.messages.delay_seconds`); an earlier one is re-delayed.
EARLY_TOLERANCE_SECONDS = 1.0
#: The message stays invisible past the lease by half the lease, at most this long, so a dead worker's
#: run reappears soon after its lease ends (a 10 s lease: 5 s after; the default 60 s: 30 s after).
VISIBILITY_SLACK_SECONDS = 30


def visibility_after_beat(lease_seconds: float) -> int:
    """The visibility timeout a heartbeat gives the run's message: the lease and half of it, at most
    :data:`VISIBILITY_SLACK_SECONDS` more (whole seconds, as SQS takes them)."""
    return int(lease_seconds) + int(min(VISIBILITY_SLACK_SECONDS, lease_seconds / 2))


#: How often a running target's cancellation flag is read (decision 0013): a cancel reaches
#: ``ctx.cancelled`` within about this long, for one read unit per read.
CANCEL_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class WorkerConfig:
    owner: str  # unique per worker invocation/process: the lease owner
    lease_seconds: float = 60.0
    heartbeat_seconds: float | None = None  # default: a third of the lease
    allowed_http_hosts: tuple[str, ...] = ()
    safety_margin_seconds: float = SAFETY_MARGIN_SECONDS
    cancel_poll_seconds: float = CANCEL_POLL_SECONDS  # 0 = only the heartbeat reads the flag
    #: The deployment's code version (``JOBSCHED_CODE_VERSION``), recorded on every attempt it claims.
    code_version: str | None = None

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat_seconds if self.heartbeat_seconds is not None else self.lease_seconds / 3


@dataclass
class _Running:
    """A run this worker executes: its claim, its handler's stop event, whether it was handed back, and
    the lock that keeps a heartbeat's lease and visibility writes apart from a hand-back."""

    claim: Claim
    stop: threading.Event
    handed: threading.Event
    lock: threading.Lock


#: Outcomes after which the delivery's run has ended (or had already ended: a duplicate delivery).
FINISHED_OUTCOMES = frozenset(
    {OutcomeStatus.SUCCEEDED, OutcomeStatus.DEAD_LETTERED, OutcomeStatus.CANCELLED, OutcomeStatus.FINISHED}
)
#: ``on_finished(message, outcome, now)``: called after a delivery whose outcome is in FINISHED_OUTCOMES.
RunFinished = Callable[[RunMessage, Outcome, datetime], None]


class ChunkRunner(Protocol):
    """What the worker needs of chunked jobs (:class:`jobsched.long_jobs.chunk_runner.ChunkRunner`).

    ``job_for`` names the chunked job a run's target is (None for any other target); ``start`` hands a
    claimed run to its Step Functions execution. The workflow's own ``chunk.*`` messages never reach
    the worker: :class:`jobsched.services.deliveries.Deliveries` routes them to the runner's ``handle``.
    """

    def job_for(self, target: dict[str, Any]) -> Any | None: ...

    def start(self, msg: RunMessage, claim: Claim, job: Any, now: datetime) -> Outcome: ...


class NoChunks:
    """The :class:`ChunkRunner` of a deployment without a state machine: no target is a chunked job."""

    def job_for(self, target: dict[str, Any]) -> Any | None:
        return None

    def start(self, msg: RunMessage, claim: Claim, job: Any, now: datetime) -> Outcome:
        raise AssertionError("NoChunks names no chunked job, so it never starts one")


class Worker:
    """Executes runs delivered by SQS. Everything is injected: stores, the run queues, clock, rng.

    Its SQS calls (retries, re-delays, visibility changes) go through ``queues``
    (:class:`~jobsched.ports.stores.RunQueue`; :class:`jobsched.aws.queues.RunQueues` metered on the
    attempts' meter, so one meter sees all of a worker's calls).
    """

    def __init__(
        self,
        *,
        config: WorkerConfig,
        attempts: AttemptRecords,
        outputs: Outputs,
        queues: RunQueue,
        clock: Clock,
        effects: IdempotentEffects | None = None,
        metrics: obs.MetricSink | None = None,
        rng: random.Random | None = None,
        chunks: ChunkRunner | None = None,
        sleep: Callable[[float], None] = time.sleep,
        limits: LimitGate | None = None,
        on_finished: RunFinished | None = None,
        budget_cap: QueuedAheadCap | None = None,
    ):
        self.attempts = attempts
        self.outputs = outputs
        self.queues = queues
        self.clock = clock
        self.config = config
        self.effects = effects
        self.metrics = metrics or obs.NullSink()
        self.rng = rng or random.Random()
        #: Chunked jobs (Step Functions); :class:`NoChunks` when the deployment has no state machine.
        self.chunks: ChunkRunner = chunks if chunks is not None else NoChunks()
        #: Waits out the sub-second rest of an early delivery (tests inject one that moves their clock).
        self.sleep = sleep
        #: Concurrency and rate limits, checked before the claim (None: the deployment has none).
        self.limits = limits
        #: The spend cap on runs queued ahead, checked before the limits (None: no spend caps).
        self.budget_cap = budget_cap
        #: Told after a delivery that found its run ended (:data:`FINISHED_OUTCOMES`): the extension
        #: point of DAG workflows (:mod:`jobsched.services.workflows` starts a node's children).
        self.on_finished = on_finished
        #: The runs executing now, by run id (what :meth:`hand_back` gives up).
        self._running: dict[str, _Running] = {}
        self._running_lock = threading.Lock()
        #: Reads the cancellation flags of all the runs this worker executes, batched (decision 0013).
        self.cancel_board = CancelBoard(
            lambda run_ids: self.attempts.cancel_flags(run_ids),
            config.cancel_poll_seconds,
            on_read=lambda first: self.attempts.record_flag_read(request=first),
        )

    # --- entry -----------------------------------------------------------------------------------

    def accepts(self, body: str) -> bool:
        """Every body: a message that is not a run's fails to parse in :meth:`handle` (SQS redrives it)."""
        return True

    def handle(
        self, delivery: Delivery, now: datetime, *, remaining_seconds: float = DEFAULT_REMAINING_SECONDS
    ) -> Outcome:
        """Handle one run delivery at ``now``; see the module docstring for the steps. Every log line
        written meanwhile, in any of the run's threads, carries the run's keys. The delivery's
        ``receive_count`` (``ApproximateReceiveCount``) lets a limit wait near the redrive re-send the
        message."""
        msg = RunMessage.from_json(delivery.body)
        keys = obs.run_keys(job_id=msg.job_id, run_id=msg.run_id, attempt=msg.attempt, tenant=msg.tenant)
        with obs.run_log_keys(**keys):
            outcome = self._process(
                msg,
                now,
                delivery.receipt_handle,
                delivery.queue_url,
                remaining_seconds,
                delivery.receive_count,
            )
            if self.on_finished is not None and outcome.status in FINISHED_OUTCOMES:
                try:
                    self.on_finished(msg, outcome, self.clock.now())
                except Exception:  # the run's outcome stands; the sweeper completes what follows it
                    logger.exception("on_finished of run %s failed", msg.run_id)
            return outcome

    def _process(
        self,
        msg: RunMessage,
        now: datetime,
        receipt_handle: str | None,
        queue_url: str | None,
        remaining_seconds: float,
        receive_count: int | None = None,
    ) -> Outcome:
        if msg.due_at > now + timedelta(seconds=EARLY_TOLERANCE_SECONDS):
            self._send(msg, now)
            return Outcome(OutcomeStatus.REDELAYED, msg.run_id, msg.attempt)
        if msg.due_at > now:  # up to 1 s early by design: wait, so the run starts on time, never before
            early = (msg.due_at - now).total_seconds()
            self.sleep(early)
            now, remaining_seconds = max(now, self.clock.now()), remaining_seconds - early
        budget = remaining_seconds - self.config.safety_margin_seconds
        if budget < min(msg.timeout_seconds, 60):
            self._set_visibility(queue_url, receipt_handle, 0)
            return Outcome(OutcomeStatus.NO_TIME, msg.run_id, msg.attempt, defer=True)

        if self.budget_cap is not None and (skipped := self.budget_cap.skip(msg, now)) is not None:
            return skipped  # its tenant reached its monthly budget since the run was queued
        admission = self._admit(msg, now, queue_url, receipt_handle, receive_count)
        if admission.outcome is not None:  # held back by a limit: no attempt used
            return admission.outcome
        # A rate booking under a second was slept out: the run starts (and its lease runs) from now.
        now = max(now, self.clock.now())
        try:
            return self._claim_and_run(msg, now, budget, queue_url, receipt_handle, admission)
        finally:
            admission.release(self.clock.now())

    def _admit(
        self,
        msg: RunMessage,
        now: datetime,
        queue_url: str | None,
        receipt: str | None,
        receive_count: int | None = None,
    ) -> Admission:
        if self.limits is None:
            return unlimited()
        return self.limits.admit(msg, now, queue_url, receipt, self.config.owner, receive_count)

    def _claim_and_run(
        self,
        msg: RunMessage,
        now: datetime,
        budget: float,
        queue_url: str | None,
        receipt_handle: str | None,
        admission: Admission,
    ) -> Outcome:
        claim = self.attempts.claim(
            msg.run_id,
            msg.attempt,
            self.config.owner,
            now,
            self.config.lease_seconds,
            msg.token,
            self._binding(msg),
        )
        if claim.run is not None:  # from here on the message carries the version the run is bound to
            msg = msg.bound_to(claim.run.handler_version)
        if claim.status != ClaimStatus.CLAIMED:
            return self._not_claimed(msg, claim, now, queue_url, receipt_handle)
        assert claim.run is not None
        if claim.attempt == 1:
            lag = max(0.0, (now - claim.run.due_at).total_seconds())
            obs.add_per_pool(self.metrics, obs.SCHEDULE_LAG, claim.run.pool, lag)
        if (chunked := self.chunks.job_for(msg.target)) is not None:
            return self.chunks.start(msg, claim, chunked, now)  # the workflow finishes the run
        with obs.run_log_keys(attempt=claim.attempt):  # a takeover runs a later attempt than the message's
            return self._execute(
                msg, claim, now, min(float(msg.timeout_seconds), budget), queue_url, receipt_handle, admission
            )

    def _binding(self, msg: RunMessage) -> Binding:
        """What the claim records: the handler, the version to bind (the message's, else the newest
        registered here; None when this code has none of the handler) and the code version."""
        name = msg.handler
        version = msg.handler_version
        if name is not None and version is None:
            version = newest_version(name)
        return Binding(handler=name, version=version, code_version=self.config.code_version)

    # --- stopping --------------------------------------------------------------------------------

    @property
    def running(self) -> list[str]:
        """The ids of the runs this worker executes right now."""
        with self._running_lock:
            return list(self._running)

    def hand_back(self, now: datetime) -> list[str]:
        """Give up every run this worker executes (decision 0052): for each, the fenced hand-back write
        (no attempt used, nothing recorded failed), then its handler's stop event. A heartbeat in
        progress is waited for, and none extends the lease or the message's visibility after it. A run
        that is no longer this worker's (taken over, ended) is left alone. Returns the runs handed back;
        making their messages visible is the caller's (it holds the receipts)."""
        with self._running_lock:
            running = list(self._running.values())
        handed: list[str] = []
        for entry in running:
            run_id = entry.claim.run.id if entry.claim.run is not None else "?"
            with entry.lock:
                try:
                    self.attempts.hand_back(entry.claim, self.config.owner, now)
                except LeaseLostError as lost:
                    logger.warning("run %s not handed back: %s", run_id, lost.message)
                    continue
                except Exception:  # the lease then expires and the run is taken over (attempt lost)
                    logger.exception("run %s could not be handed back", run_id)
                    continue
                entry.handed.set()
            entry.stop.set()
            handed.append(run_id)
            logger.info("run %s attempt %s handed back", run_id, entry.claim.attempt)
        return handed

    # --- not ours --------------------------------------------------------------------------------

    def _not_claimed(
        self, msg: RunMessage, claim: Claim, now: datetime, queue_url: str | None, receipt: str | None
    ) -> Outcome:
        if claim.status == ClaimStatus.BUSY:
            run = claim.run
            assert run is not None and run.lease_until is not None
            wait = math.ceil((run.lease_until - now).total_seconds()) + 1
            if msg.attempt == run.attempt + 1:  # a retry that raced its own "retrying" mark: look again soon
                wait = min(wait, 5)
            self._set_visibility(queue_url, receipt, wait)
            return Outcome(OutcomeStatus.BUSY, msg.run_id, msg.attempt, defer=True, detail={"retry_in": wait})
        if claim.status == ClaimStatus.EXHAUSTED:
            assert claim.run is not None
            error = (
                f"the worker running attempt {claim.run.attempt} stopped (lease expired); no attempts left"
            )
            try:
                self.attempts.fail_unclaimed(claim.run, now, error, "lease_expired", msg.to_json())
            except Exception:  # someone else moved it on: nothing for us to do
                logger.warning("exhausted run %s changed before it could be dead-lettered", msg.run_id)
                return Outcome(OutcomeStatus.STALE, msg.run_id, msg.attempt)
            # No RunsFailed: the attempt that failed (its worker stopped) was never counted as
            # executed by any worker; only the dead letter is counted (docs/semantics/limits.md).
            obs.add_per_pool(self.metrics, obs.RUNS_DEAD_LETTERED, claim.run.pool)
            return Outcome(
                OutcomeStatus.DEAD_LETTERED, msg.run_id, claim.attempt, detail={"reason": "lease_expired"}
            )
        if claim.superseded:
            logger.info(
                "message of run %s attempt %s superseded by a newer send; dropped", msg.run_id, msg.attempt
            )
            return Outcome(claim.status, msg.run_id, msg.attempt, detail={"superseded": True})
        return Outcome(claim.status, msg.run_id, msg.attempt)

    # --- execution -------------------------------------------------------------------------------

    def _execute(
        self,
        msg: RunMessage,
        claim: Claim,
        now: datetime,
        timeout: float,
        queue_url: str | None,
        receipt: str | None,
        admission: Admission | None = None,
    ) -> Outcome:
        run = claim.run
        assert run is not None
        attempt = claim.attempt
        owner = self.config.owner
        cancel_seen = threading.Event()
        pending_progress: list[Any] = []
        ctx = JobContext(
            run_id=run.id,
            job_id=run.job_id,
            tenant=run.tenant,
            attempt=attempt,
            max_attempts=run.max_attempts,
            scheduled_at=run.scheduled_at,
            due_at=run.due_at,
            timeout_seconds=timeout,
            effects=self.effects,
            on_progress=pending_progress.append,
        )

        def cancel() -> None:
            cancel_seen.set()
            ctx.cancel_event.set()

        running = _Running(claim, ctx.cancel_event, threading.Event(), threading.Lock())

        def beat() -> None:
            progress = pending_progress[-1] if pending_progress else None
            pending_progress.clear()
            lease = self.config.lease_seconds
            with running.lock:  # never between a hand-back's write and its caller's visibility change
                if running.handed.is_set():
                    raise LeaseLostError(f"attempt {attempt} of run {run.id} was handed back")
                beat_at = self.clock.now()
                if self.attempts.heartbeat(run.id, attempt, owner, beat_at, lease, progress):
                    cancel()
                if admission is not None:
                    admission.renew(beat_at)  # the run's concurrency slots live as long as its lease
                self._set_visibility(queue_url, receipt, visibility_after_beat(lease))

        started = self.clock.now()
        error: BaseException | None = None
        output: Any = None
        heartbeat = Heartbeat(beat, self.config.heartbeat_interval, ctx.cancel_event)
        watch = self.cancel_board.watch(run.id, ctx.cancel_event, cancel)
        with self._running_lock:
            self._running[run.id] = running
        try:
            payload = self._payload(msg, claim)
            with heartbeat:
                if run.cancel_requested:
                    cancel()
                else:
                    with watch:
                        output = execute_target(
                            msg.target,
                            payload,
                            ctx,
                            timeout_seconds=timeout,
                            allowed_hosts=self.config.allowed_http_hosts,
                        )
        except Exception as exc:  # classified below; never escapes as a batch failure
            error = exc
        finally:
            with self._running_lock:
                self._running.pop(run.id, None)
        finished = self.clock.now()
        duration = (finished - started).total_seconds()
        obs.add_per_pool(self.metrics, obs.RUN_DURATION, run.pool, duration)
        outcome = self._concluded(
            msg, claim, running, heartbeat.lost, cancel_seen.is_set(), finished, output, error
        )
        # the "run delivery handled" line carries them: the slowest-runs query (infra/queries.py) reads them
        outcome.detail.update(duration_seconds=round(duration, 3), pool=run.pool)
        return outcome

    def _concluded(
        self,
        msg: RunMessage,
        claim: Claim,
        running: _Running,
        heartbeat_lost: bool,
        cancelled: bool,
        finished: datetime,
        output: Any,
        error: BaseException | None,
    ) -> Outcome:
        """The outcome of an attempt whose target returned or raised: handed back, lease lost,
        cancelled, succeeded, retrying or dead-lettered (its writes made, its metrics counted)."""
        run = claim.run
        assert run is not None
        attempt, owner = claim.attempt, self.config.owner
        if running.handed.is_set():  # given up (hand_back): the next delivery runs the same attempt
            return Outcome(OutcomeStatus.HANDED_BACK, run.id, attempt, defer=True)
        if heartbeat_lost:  # another worker owns the run now: any write of ours would be rejected
            logger.warning("lease of run %s attempt %s was lost while running", run.id, attempt)
            # the attempt is recorded `lost`; its result is discarded
            obs.add_per_pool(self.metrics, obs.RUNS_FAILED, run.pool)
            return Outcome(OutcomeStatus.LEASE_LOST, run.id, attempt, detail={"heartbeat_lost": True})
        try:
            if cancelled:
                self.attempts.cancelled(claim, owner, finished)
                self.metrics.add(obs.RUNS_CANCELLED)
                return Outcome(OutcomeStatus.CANCELLED, run.id, attempt)
            if error is None:
                return self._succeeded(claim, finished, output)
            return self._failed(msg, claim, finished, error)
        except LeaseLostError as lost:
            logger.warning("%s", lost.message)
            # as a lost heartbeat: the attempt's result is discarded
            obs.add_per_pool(self.metrics, obs.RUNS_FAILED, run.pool)
            return Outcome(OutcomeStatus.LEASE_LOST, run.id, attempt, detail={"heartbeat_lost": False})

    def _payload(self, msg: RunMessage, claim: Claim) -> Any:
        """The payload the target is called with; for a handler, upgraded from the message's
        ``payload_version`` to the bound version and checked against its contract. Raises
        :class:`ValidationError` (the version is not registered here) or :class:`PermanentError`
        (no upgrade path): both permanent, the run is dead-lettered with the message."""
        assert claim.run is not None
        if claim.run.payload_override is not None:
            payload = claim.run.payload_override
        else:
            payload = msg.payload if msg.payload is not None else {}
        if msg.handler is None or not isinstance(payload, dict):
            return payload
        return lookup(msg.handler, msg.handler_version).payload_for(payload, msg.payload_version)

    def _succeeded(self, claim: Claim, now: datetime, output: Any) -> Outcome:
        run = claim.run
        assert run is not None
        inline, ref = self.outputs.place_output(run.tenant, run.id, claim.attempt, output)
        self.attempts.succeed(claim, self.config.owner, now, output=inline, output_ref=ref)
        obs.add_per_pool(self.metrics, obs.RUNS_SUCCEEDED, run.pool)
        return Outcome(OutcomeStatus.SUCCEEDED, run.id, claim.attempt, detail={"output_ref": ref})

    def _failed(self, msg: RunMessage, claim: Claim, now: datetime, exc: BaseException) -> Outcome:
        run = claim.run
        assert run is not None
        info = error_info(exc)
        text = f"{info['type']}: {info['message']}"
        classification = classify_error(exc)
        if classification == PERMANENT or claim.attempt >= run.max_attempts:
            reason = "permanent" if classification == PERMANENT else "exhausted"
            self.attempts.dead_letter(claim, self.config.owner, now, text, reason, msg.to_json())
            obs.add_per_pool(self.metrics, obs.RUNS_FAILED, run.pool)
            obs.add_per_pool(self.metrics, obs.RUNS_DEAD_LETTERED, run.pool)
            return Outcome(
                OutcomeStatus.DEAD_LETTERED, run.id, claim.attempt, detail={"reason": reason, "error": text}
            )
        delay = retry_delay(msg, claim.attempt, self.rng)
        not_before = getattr(exc, "retry_after_seconds", None)
        if isinstance(exc, RetryableError) and isinstance(not_before, int | float) and not_before > delay:
            delay = float(not_before)  # the failure said when a retry can help: no attempt spent sooner
        retry_at = now + timedelta(seconds=delay)
        token = new_send_token()  # recorded by the mark below: the retry's message is the run's newest
        retry = replace(msg, attempt=claim.attempt + 1, due_at=retry_at, token=token)
        self._send(retry, now)  # send first, then mark
        self.attempts.retrying(claim, self.config.owner, now, retry_at, text, token=token)
        obs.add_per_pool(self.metrics, obs.RUNS_FAILED, run.pool)  # every failed attempt, retried or not
        obs.add_per_pool(self.metrics, obs.RUNS_RETRIED, run.pool)
        return Outcome(OutcomeStatus.RETRYING, run.id, claim.attempt, detail={"delay": delay, "error": text})

    # --- SQS -------------------------------------------------------------------------------------

    def _send(self, msg: RunMessage, now: datetime) -> None:
        self.queues.send_one(msg, now)

    def _set_visibility(self, queue_url: str | None, receipt: str | None, seconds: int) -> None:
        if queue_url and receipt:
            self.queues.set_visibility(queue_url, receipt, seconds)


def retry_delay(msg: RunMessage, attempt: int, rng: random.Random) -> float:
    """Full-jitter backoff after failed ``attempt``, from the message's retry settings."""
    base, cap = float(msg.retry.base_seconds), float(msg.retry.max_seconds)
    if cap <= 0 or base <= 0:
        return 0.0
    policy = RetryPolicy(
        max_attempts=max(1, min(msg.retry.max_attempts, 100)), base_seconds=base, max_seconds=cap
    )
    return backoff_delay(policy, attempt, rng)


# --- one SQS batch -----------------------------------------------------------------------------


def process_batch(
    deliveries: Sequence[Delivery], handle: Callable[[Delivery], Outcome], *, concurrency: int
) -> list[str]:
    """Handle one SQS batch, up to ``concurrency`` records at once (threads: each record is a different
    run with its own lease and fenced writes, so they do not interfere); return the message ids to
    leave in the queue: Lambda's partial batch response. A deferred outcome and a record whose
    handling raised stay; every other record is acknowledged. One bad record never fails the batch."""

    def one(delivery: Delivery) -> str | None:
        try:
            outcome = handle(delivery)
        except Exception:  # retried by SQS, then redriven to the DLQ (the DLQ consumer records it)
            logger.exception("run delivery failed", extra={"message_id": delivery.message_id})
            return delivery.message_id
        return delivery.message_id if outcome.defer else None

    threads = min(max(1, concurrency), len(deliveries))
    results = [one(d) for d in deliveries] if threads <= 1 else _on_kept_threads(one, deliveries, threads)
    return [message_id for message_id in results if message_id is not None]


#: The worker's record threads, kept for the process's life and shared by its callers (see KeptThreads:
#: a pool per batch started and joined ten threads at every invocation, 5 % of the worker's time on the
#: CPU in the cost benchmark).
_RECORD_THREADS = KeptThreads("record")


def _on_kept_threads(
    one: Callable[[Delivery], str | None], deliveries: Sequence[Delivery], threads: int
) -> list[str | None]:
    """``one`` of every delivery, at most ``threads`` at once on kept threads, each in a fresh copy of
    the invocation's context as it was when the batch began (as a pool that copies the context gives:
    what the invocation set carries over, nothing a record before it on the same thread set — its log
    keys, its lane — does); the results in delivery order. Something not an ``Exception`` raised by a
    record (an injected kill) is raised here, as from the pool it replaces."""
    batch_context = contextvars.copy_context()
    results: list[str | None] = [None] * len(deliveries)
    escaped: list[BaseException] = []
    pending = iter(enumerate(deliveries))
    lock = threading.Lock()

    def drain() -> None:
        while True:
            with lock:
                if escaped:
                    return
                nxt = next(pending, None)
            if nxt is None:
                return
            index, delivery = nxt
            try:
                results[index] = batch_context.copy().run(one, delivery)
            except BaseException as exc:  # not caught by ``one``: handed to the caller
                with lock:
                    escaped.append(exc)
                return

    for done in [_RECORD_THREADS.run(drain) for _ in range(threads)]:
        done.wait()
    if escaped:
        raise escaped[0]
    return results
