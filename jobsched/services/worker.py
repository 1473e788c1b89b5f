"""The worker service: one SQS delivery of a run in, one fenced outcome out.

``Worker.process`` is what ``functions/worker`` (and the local mode's poller) calls per record:

1. parse the message (a malformed one raises: SQS redrives it to the DLQ, the DLQ consumer records it);
2. a delivery that arrives before its due instant (a delay over SQS's 900 s cap) is re-sent with the
   rest of the delay and acknowledged;
3. claim the run for the message's attempt (:meth:`AttemptStore.claim`): a finished or superseded run is
   acknowledged without doing anything (guarantee 2: a redelivery after a crash does nothing new); a run
   another worker holds is left in the queue; a run whose owner's lease expired is taken over;
4. run the target under ``min(timeout, Lambda time left)`` with a heartbeat every third of the lease
   that extends the lease and the message's visibility, writes progress and reads the cancel flag;
5. record the outcome with a write fenced on the attempt: succeeded (output inline or in S3), cancelled,
   retrying (the next attempt is *sent first*, then the run is marked, so a crash in between leaves a
   message that finds the run and claims it; never a run waiting for a message that does not exist),
   or failed and dead-lettered (permanent error, or attempts used up).

Retry delays over 900 s are carried by the message itself: each delivery before ``due_at`` re-sends
itself with the remaining delay (step 2). That costs one SQS request per 15 minutes of backoff and no
DynamoDB write or index entry, where a "retry due" index would cost index writes on every retry.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobsched.aws.attempts import AttemptStore, Claim, ClaimStatus
from jobsched.aws.outputs import OutputStore
from jobsched.core.clock import Clock
from jobsched.core.errors import LeaseLostError
from jobsched.core.messages import RunMessage, delay_seconds
from jobsched.core.retry import PERMANENT, RetryPolicy, backoff_delay, classify_error
from jobsched.runtime import observability as obs
from jobsched.targets.context import IdempotentEffects, JobContext
from jobsched.targets.executor import Heartbeat, error_info, execute_target

if TYPE_CHECKING:
    from jobsched.long_jobs.chunk_runner import ChunkRunner

logger = logging.getLogger(__name__)

#: Seconds of the Lambda's remaining time kept back for recording the outcome.
SAFETY_MARGIN_SECONDS = 5.0
#: A delivery up to this early is waited out in the worker, then run (``DelaySeconds`` is whole seconds,
#: rounded down: see :func:`jobsched.core.messages.delay_seconds`); an earlier one is re-delayed.
EARLY_TOLERANCE_SECONDS = 1.0
#: The message stays invisible this long past the lease, so a dead worker's run reappears soon after.
VISIBILITY_SLACK_SECONDS = 30


@dataclass(frozen=True)
class WorkerConfig:
    owner: str  # unique per worker invocation/process: the lease owner
    lease_seconds: float = 60.0
    heartbeat_seconds: float | None = None  # default: a third of the lease
    allowed_http_hosts: tuple[str, ...] = ()
    safety_margin_seconds: float = SAFETY_MARGIN_SECONDS

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat_seconds if self.heartbeat_seconds is not None else self.lease_seconds / 3


@dataclass
class Outcome:
    """What happened to one delivery. ``defer`` means: do not acknowledge (the message comes back)."""

    #: succeeded | retrying | dead_lettered | cancelled | finished | stale | missing | busy |
    #: redelayed | lease_lost | no_time
    status: str
    run_id: str | None = None
    attempt: int = 0
    defer: bool = False
    detail: dict[str, Any] = field(default_factory=dict)


class Worker:
    """Executes runs delivered by SQS. Everything is injected: stores, SQS client, clock, rng."""

    def __init__(
        self,
        *,
        attempts: AttemptStore,
        outputs: OutputStore,
        sqs: Any,
        queue_urls: dict[str, str] | Any,
        clock: Clock,
        config: WorkerConfig,
        effects: IdempotentEffects | None = None,
        metrics: obs.MetricSink | None = None,
        rng: random.Random | None = None,
        chunks: ChunkRunner | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.attempts = attempts
        self.outputs = outputs
        self.sqs = sqs
        self.queue_urls = queue_urls
        self.clock = clock
        self.config = config
        self.effects = effects
        self.metrics = metrics or obs.NullSink()
        self.rng = rng or random.Random()
        #: Chunked jobs (Step Functions); None when the deployment has no state machine.
        self.chunks = chunks
        #: Waits out the sub-second rest of an early delivery (tests inject one that moves their clock).
        self.sleep = sleep

    # --- entry -----------------------------------------------------------------------------------

    def process(
        self,
        body: str,
        now: datetime,
        *,
        receipt_handle: str | None = None,
        queue_url: str | None = None,
        remaining_seconds: float = 900.0,
    ) -> Outcome:
        """Handle one delivery at ``now``; see the module docstring for the steps."""
        if self.chunks is not None and self.chunks.accepts(body):  # a chunked job's workflow task
            return self.chunks.handle(
                body,
                now,
                receipt_handle=receipt_handle,
                queue_url=queue_url,
                remaining_seconds=remaining_seconds,
            )
        msg = RunMessage.from_json(body)
        if msg.due_at > now + timedelta(seconds=EARLY_TOLERANCE_SECONDS):
            self._send(msg, now)
            return Outcome("redelayed", msg.run_id, msg.attempt)
        if msg.due_at > now:  # up to 1 s early by design: wait, so the run starts on time, never before
            early = (msg.due_at - now).total_seconds()
            self.sleep(early)
            now, remaining_seconds = max(now, self.clock.now()), remaining_seconds - early
        budget = remaining_seconds - self.config.safety_margin_seconds
        if budget < min(msg.timeout_seconds, 60):
            self._set_visibility(queue_url, receipt_handle, 0)
            return Outcome("no_time", msg.run_id, msg.attempt, defer=True)

        claim = self.attempts.claim(
            msg.run_id, msg.attempt, self.config.owner, now, self.config.lease_seconds
        )
        if claim.status != ClaimStatus.CLAIMED:
            return self._not_claimed(msg, claim, now, queue_url, receipt_handle)
        assert claim.run is not None
        if claim.attempt == 1:
            self.metrics.add(obs.SCHEDULE_LAG, max(0.0, (now - claim.run.due_at).total_seconds()))
        if self.chunks is not None and (chunked := self.chunks.job_for(msg.target)) is not None:
            return self.chunks.start(msg, claim, chunked, now)  # the workflow finishes the run
        return self._execute(
            msg, claim, now, min(float(msg.timeout_seconds), budget), queue_url, receipt_handle
        )

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
            return Outcome("busy", msg.run_id, msg.attempt, defer=True, detail={"retry_in": wait})
        if claim.status == ClaimStatus.EXHAUSTED:
            assert claim.run is not None
            error = (
                f"the worker running attempt {claim.run.attempt} stopped (lease expired); no attempts left"
            )
            try:
                self.attempts.fail_unclaimed(claim.run, now, error, "lease_expired", msg.to_json())
            except Exception:  # someone else moved it on: nothing for us to do
                logger.warning("exhausted run %s changed before it could be dead-lettered", msg.run_id)
                return Outcome("stale", msg.run_id, msg.attempt)
            self.metrics.add(obs.RUNS_FAILED)
            self.metrics.add(obs.RUNS_DEAD_LETTERED)
            return Outcome("dead_lettered", msg.run_id, claim.attempt, detail={"reason": "lease_expired"})
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

        def beat() -> None:
            progress = pending_progress[-1] if pending_progress else None
            pending_progress.clear()
            lease = self.config.lease_seconds
            if self.attempts.heartbeat(run.id, attempt, owner, self.clock.now(), lease, progress):
                cancel_seen.set()
                ctx.cancel_event.set()
            self._set_visibility(queue_url, receipt, int(lease) + VISIBILITY_SLACK_SECONDS)

        started = self.clock.now()
        error: BaseException | None = None
        output: Any = None
        heartbeat = Heartbeat(beat, self.config.heartbeat_interval, ctx.cancel_event)
        try:
            payload = self._payload(msg, claim)
            with heartbeat:
                if claim.run.cancel_requested:
                    cancel_seen.set()
                    ctx.cancel_event.set()
                else:
                    output = execute_target(
                        msg.target,
                        payload,
                        ctx,
                        timeout_seconds=timeout,
                        allowed_hosts=self.config.allowed_http_hosts,
                    )
        except Exception as exc:  # classified below; never escapes as a batch failure
            error = exc
        finished = self.clock.now()
        self.metrics.add(obs.RUN_DURATION, (finished - started).total_seconds())
        if heartbeat.lost:  # another worker owns the run now: any write of ours would be rejected
            logger.warning("lease of run %s attempt %s was lost while running", run.id, attempt)
            return Outcome("lease_lost", run.id, attempt, detail={"heartbeat_lost": True})
        try:
            if cancel_seen.is_set():
                self.attempts.cancelled(claim, owner, finished)
                self.metrics.add(obs.RUNS_CANCELLED)
                return Outcome("cancelled", run.id, attempt)
            if error is None:
                return self._succeeded(claim, finished, output)
            return self._failed(msg, claim, finished, error)
        except LeaseLostError as lost:
            logger.warning("%s", lost.message)
            return Outcome("lease_lost", run.id, attempt, detail={"heartbeat_lost": False})

    def _payload(self, msg: RunMessage, claim: Claim) -> Any:
        assert claim.run is not None
        if claim.run.payload_override is not None:
            return claim.run.payload_override
        return msg.payload if msg.payload is not None else {}

    def _succeeded(self, claim: Claim, now: datetime, output: Any) -> Outcome:
        run = claim.run
        assert run is not None
        inline, ref = self.outputs.place_output(run.tenant, run.id, claim.attempt, output)
        self.attempts.succeed(claim, self.config.owner, now, output=inline, output_ref=ref)
        self.metrics.add(obs.RUNS_SUCCEEDED)
        return Outcome("succeeded", run.id, claim.attempt, detail={"output_ref": ref})

    def _failed(self, msg: RunMessage, claim: Claim, now: datetime, exc: BaseException) -> Outcome:
        run = claim.run
        assert run is not None
        info = error_info(exc)
        text = f"{info['type']}: {info['message']}"
        classification = classify_error(exc)
        if classification == PERMANENT or claim.attempt >= run.max_attempts:
            reason = "permanent" if classification == PERMANENT else "exhausted"
            self.attempts.dead_letter(claim, self.config.owner, now, text, reason, msg.to_json())
            self.metrics.add(obs.RUNS_FAILED)
            self.metrics.add(obs.RUNS_DEAD_LETTERED)
            return Outcome("dead_lettered", run.id, claim.attempt, detail={"reason": reason, "error": text})
        delay = retry_delay(msg, claim.attempt, self.rng)
        retry_at = now + timedelta(seconds=delay)
        self._send(replace(msg, attempt=claim.attempt + 1, due_at=retry_at), now)  # send first, then mark
        self.attempts.retrying(claim, self.config.owner, now, retry_at, text)
        self.metrics.add(obs.RUNS_RETRIED)
        return Outcome("retrying", run.id, claim.attempt, detail={"delay": delay, "error": text})

    # --- SQS -------------------------------------------------------------------------------------

    def _send(self, msg: RunMessage, now: datetime) -> None:
        send_run_message(self.sqs, self.queue_urls[msg.priority], msg, now)

    def _set_visibility(self, queue_url: str | None, receipt: str | None, seconds: int) -> None:
        if queue_url and receipt:
            try:
                self.sqs.change_message_visibility(
                    QueueUrl=queue_url,
                    ReceiptHandle=receipt,
                    VisibilityTimeout=max(0, min(int(seconds), 43_200)),
                )
            except Exception:  # the message may be gone already; the lease is what fences
                logger.warning("could not change the visibility of a message", exc_info=True)


def retry_delay(msg: RunMessage, attempt: int, rng: random.Random) -> float:
    """Full-jitter backoff after failed ``attempt``, from the message's retry settings."""
    base, cap = float(msg.retry.base_seconds), float(msg.retry.max_seconds)
    if cap <= 0 or base <= 0:
        return 0.0
    policy = RetryPolicy(
        max_attempts=max(1, min(msg.retry.max_attempts, 100)), base_seconds=base, max_seconds=cap
    )
    return backoff_delay(policy, attempt, rng)


def send_run_message(sqs: Any, queue_url: str, msg: RunMessage, now: datetime) -> None:
    """Send one run message (a retry, a replay, a sweeper re-send) with ``DelaySeconds`` rounded down as
    the dispatcher does (:func:`jobsched.core.messages.delay_seconds`: the worker waits out the
    sub-second rest, so the attempt starts at its due instant) and the tenant as the message group."""
    sqs.send_message(
        QueueUrl=queue_url,
        MessageBody=msg.to_json(),
        DelaySeconds=delay_seconds(msg.due_at, now),
        MessageGroupId=msg.tenant,
    )


def worker_from_settings(
    settings: Any,
    clients: Any,
    clock: Clock,
    owner: str,
    *,
    metrics: obs.MetricSink | None = None,
    meter: Any = None,
    lease_seconds: float = 60.0,
) -> Worker:
    """A worker over the deployment's tables, queues and bucket (the function entry point and the
    local mode build it the same way)."""
    from jobsched.aws.metering import dynamo_for

    dynamo = dynamo_for(settings, clients.dynamodb, meter)
    effects = (
        IdempotentEffects(clients.dynamodb, settings.idempotency_table)
        if settings.idempotency_table
        else None
    )
    return Worker(
        attempts=AttemptStore(dynamo, settings.runs_table),
        outputs=OutputStore(clients.s3, settings.bucket),
        sqs=clients.sqs,
        queue_urls=dict(settings.queue_urls),
        clock=clock,
        config=WorkerConfig(
            owner=owner, lease_seconds=lease_seconds, allowed_http_hosts=tuple(settings.allowed_http_hosts)
        ),
        effects=effects,
        metrics=metrics,
        chunks=_chunk_runner(settings, clients, dynamo, clock, owner, metrics, lease_seconds),
    )


def _chunk_runner(
    settings: Any, clients: Any, dynamo: Any, clock: Clock, owner: str, metrics: Any, lease_seconds: float
) -> ChunkRunner | None:
    """The chunked-job runner when the deployment has a state machine (``JOBSCHED_STATE_MACHINE_ARN``)."""
    if not getattr(settings, "state_machine_arn", None):
        return None
    from jobsched.long_jobs.chunk_runner import chunk_runner_from_settings

    return chunk_runner_from_settings(
        settings, clients, dynamo, clock, owner, metrics=metrics, heartbeat_seconds=lease_seconds / 3
    )


def queue_url_for_arn(queue_urls: dict[str, str] | Any, arn: str) -> str | None:
    """The URL of the queue an event source ARN names (``arn:aws:sqs:<region>:<account>:<name>``)."""
    name = arn.rsplit(":", 1)[-1]
    for url in dict(queue_urls).values():
        if url.rstrip("/").rsplit("/", 1)[-1] == name:
            return url
    return None
