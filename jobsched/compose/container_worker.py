"""The container worker: the Lambda worker's path in a long-running process that consumes a queue itself.

Runs longer than Lambda's 15 minutes go to the ``container`` queue; this loop consumes it on ECS
Fargate (the image's command is ``jobsched worker --pool container``), on a user's own machines
(Kubernetes: the same command) and in the embedded mode (``jobsched dev`` starts it as a child
process). Decision 0052 and docs/container-worker.md.

**The path.** A receiver thread long-polls the queue (``WaitTimeSeconds`` 20) for as many messages as
there are free slots (``--concurrency``); each message is handled on a thread of its own exactly as
the worker function handles a record: a :class:`~jobsched.services.deliveries.Delivery` through
:func:`jobsched.compose.pipeline.worker_from_settings`'s
:meth:`~jobsched.services.deliveries.Deliveries.handle` (run messages to the worker: claim with a
lease, heartbeats that extend the lease and the message's visibility, the cancel board, retries and
dead letters; ``chunk.*`` messages to the chunk runner; backfill messages to the backfill service).
There is no Lambda time limit here, so each delivery is given :data:`REMAINING_SECONDS` (the
longest container timeout plus the worker's safety margin): a run gets its whole timeout. The outcome
decides as on Lambda: deleted unless deferred; a delivery whose handling raised (a malformed body) is
left to SQS, which redrives it to the DLQ after ``maxReceiveCount`` receives.

**Graceful stop** (SIGTERM or SIGINT; ECS sends SIGTERM, then SIGKILL after the task's
``stopTimeout``): no receive is started any more, and the long poll in flight is waited for, within the
stop timeout (cut off by the exit, SQS could still hand it messages that would then stay hidden for the
visibility timeout: keep ``--wait-seconds`` under ``--stop-timeout``); a message it returns is made
visible again at once. The runs in progress get up to ``--stop-timeout`` seconds (default
:data:`DEFAULT_STOP_TIMEOUT_SECONDS`) to finish. Those still running then are handed back
(:meth:`jobsched.services.worker.Worker.hand_back`: a fenced write that gives the run up without using
its attempt, and the handler's stop event), and every message still held is made visible
(``ChangeMessageVisibility`` 0), so another worker claims the run at once and runs the same attempt;
the process then exits 0. A second signal ends the wait at once. After SIGKILL nothing is handed back:
the lease expires and the next delivery takes the run over (the killed attempt is recorded ``lost``).
The lease is ``--lease-seconds`` long (default :data:`DEFAULT_LEASE_SECONDS`, the Lambda worker's), renewed
by a heartbeat every third of it: a shorter lease has a killed task's runs taken over sooner, for one
heartbeat write per run every ``lease / 3`` seconds.

**Fargate time** (usage, decision 0059 amended): each delivery's share of the task's seconds is
counted for its run's tenant when it ends (:mod:`jobsched.compose.fargate_time`).

**Scale-in protection.** While at least one delivery is in progress the task is protected from
scale-in through the ECS agent (:class:`jobsched.aws.task_protection.TaskProtection`, renewed while
busy) and the protection is cleared when it is idle; without ``ECS_AGENT_URI`` that is a no-op.

The loop's AWS calls are made in :func:`receive_messages`, :func:`process_message`,
:func:`release_messages` and :func:`hand_back_all`, and by the cancel board :func:`worker_path` builds
(the functions :data:`RECORDED` names): the embedded mode's IAM recorder attributes them to the
function ``container_worker`` (:mod:`jobsched.local.iam.recorder`), checked against the task role.
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from jobsched.aws.clients import Clients
from jobsched.aws.queues import QueueConsumer, Received
from jobsched.aws.task_protection import TaskProtection
from jobsched.compose.fargate_time import FargateTime, task_size_from_env
from jobsched.compose.pipeline import DEFAULT_LEASE_SECONDS, worker_from_settings
from jobsched.core.clock import Clock
from jobsched.runtime import observability as obs
from jobsched.runtime.clock import SystemClock
from jobsched.runtime.resources import CONTAINER_KIND, MAX_CONTAINER_TIMEOUT_SECONDS
from jobsched.runtime.settings import Settings
from jobsched.services.deliveries import Deliveries, Delivery
from jobsched.services.outcome import Outcome
from jobsched.services.worker import SAFETY_MARGIN_SECONDS, Worker

logger = logging.getLogger(__name__)

#: The name the IAM recorder gives this loop (as a Lambda function's name).
FUNCTION_NAME = "container_worker"
#: The ``service`` dimension of its metrics: the worker functions', so the dashboard and the alarms on
#: the run metrics (RunsSucceeded, RunDuration, RunsDeadLettered, ...) count the container pool's runs.
METRICS_SERVICE = "worker"
#: The module functions whose AWS calls are the loop's (wrapped by the IAM recorder). ``worker_path``
#: makes none, but the cancel board it builds reads the flags on a thread of its own in the context it
#: was built in: built in the loop's, those reads are the loop's too.
RECORDED = ("receive_messages", "process_message", "release_messages", "hand_back_all", "worker_path")
#: ECS's ``stopTimeout`` is at most 120 s: the default leaves 20 s for the hand-back and the exit.
DEFAULT_STOP_TIMEOUT_SECONDS = 100.0
DEFAULT_CONCURRENCY = 1
#: SQS's longest long poll.
POLL_WAIT_SECONDS = 20
#: The time a delivery is given: no Lambda limit, so the longest container timeout (12 h) plus the
#: margin the worker keeps back; the run's own timeout is then the bound.
REMAINING_SECONDS = float(MAX_CONTAINER_TIMEOUT_SECONDS) + SAFETY_MARGIN_SECONDS
#: Time a long poll may take past its wait (the request's round trip), which a stop waits for.
RECEIVE_SLACK_SECONDS = 2.0
#: Pause after an empty receive that did not wait (a short poll), and after a failed one.
IDLE_SECONDS = 0.5
#: How often the main thread's wait wakes, so a SIGTERM's handler runs at once (:meth:`ContainerWorker.run`).
SIGNAL_POLL_SECONDS = 0.5
RECEIVE_ERROR_PAUSE_SECONDS = 2.0
#: ``--lease-seconds``' bounds: a heartbeat every third of the lease, so at least one a second at the
#: shortest; at the longest a killed task's runs wait an hour to be taken over.
MIN_LEASE_SECONDS = 3.0
MAX_LEASE_SECONDS = 3600.0
#: Outcomes a loop keeps (a process runs for weeks: the oldest are dropped).
OUTCOMES_KEPT = 1000


@dataclass(frozen=True)
class LoopConfig:
    """How the loop consumes its queue."""

    concurrency: int = DEFAULT_CONCURRENCY
    stop_timeout_seconds: float = DEFAULT_STOP_TIMEOUT_SECONDS
    wait_seconds: int = POLL_WAIT_SECONDS
    lease_seconds: float = DEFAULT_LEASE_SECONDS

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.stop_timeout_seconds < 0:
            raise ValueError(f"the stop timeout must be 0 or more, not {self.stop_timeout_seconds}")
        if not MIN_LEASE_SECONDS <= self.lease_seconds <= MAX_LEASE_SECONDS:
            bounds = f"{MIN_LEASE_SECONDS:g} to {MAX_LEASE_SECONDS:g}"
            raise ValueError(f"the lease must be {bounds} seconds, not {self.lease_seconds}")


class _Metrics:
    """The deliveries' metrics, shared by their threads and flushed (EMF on stdout) after each one."""

    def __init__(self) -> None:
        self._metrics = obs.make_metrics(METRICS_SERVICE)
        self._sink = obs.PowertoolsSink(self._metrics)
        self._lock = threading.Lock()

    def add(self, name: str, value: float = 1) -> None:
        with self._lock:
            self._sink.add(name, value)

    def flush(self) -> None:
        with self._lock:
            if self._metrics.metric_set:  # a delivery that counted nothing prints nothing
                self._metrics.flush_metrics()


class ContainerWorker:
    """The loop (see the module docstring): :meth:`run` until :meth:`request_stop`, then the graceful
    stop. Everything is injected: the deliveries (the worker path), the queue, the clock."""

    def __init__(
        self,
        deliveries: Deliveries[Worker],
        consumer: QueueConsumer,
        clock: Clock,
        *,
        config: LoopConfig | None = None,
        protection: TaskProtection | None = None,
        metrics: _Metrics | None = None,
        fargate: FargateTime | None = None,
    ):
        self.deliveries = deliveries
        #: Counts the deliveries' shares of the task's time (usage; counts nothing off Fargate).
        self.fargate = fargate or FargateTime(None, None)
        self.consumer = consumer
        self.clock = clock
        self.config = config or LoopConfig()
        self.protection = protection or TaskProtection(None)
        self.metrics = metrics
        self.stopping = threading.Event()
        self._hurry = threading.Event()  # a second signal: no more waiting for the runs
        self._slots = threading.Semaphore(self.config.concurrency)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._held: dict[str, Received] = {}  # message id -> the message, while it is handled
        self._protected_at: float | None = None  # monotonic instant of the last protection, if on
        self._protection_lock = threading.Lock()
        self._receiver: threading.Thread | None = None
        self._receive_until = 0.0  # monotonic instant by which the receive in flight has returned
        #: The latest outcomes (the newest :data:`OUTCOMES_KEPT`), for tests and a debugger.
        self.outcomes: deque[Outcome] = deque(maxlen=OUTCOMES_KEPT)

    # --- control ---------------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Begin the graceful stop (a signal handler's call); a second call ends its wait at once."""
        if self.stopping.is_set():
            self._hurry.set()
        self.stopping.set()

    @property
    def in_progress(self) -> int:
        with self._lock:
            return len(self._held)

    def run(self) -> int:
        """Consume until asked to stop, then stop gracefully; 0 (the process's exit status)."""
        logger.info(
            "container worker started",
            extra={"queue": self.consumer.queue_url, "concurrency": self.config.concurrency},
        )
        self.start()
        # Woken every half second, not once per protection renewal: a signal's handler runs only when
        # the main thread runs Python code, and one the kernel hands to another thread does not wake
        # it (jobsched/local/embedded.py's wait); the protection renews itself when it is due.
        while not self.stopping.wait(min(SIGNAL_POLL_SECONDS, self._renew_interval())):
            self._sync_protection()
        self.stop()
        return 0

    def start(self) -> None:
        """Start the receiver thread (:meth:`run` does; tests call it with :meth:`stop`)."""
        self._receiver = threading.Thread(target=self._receive_loop, name="container-receiver", daemon=True)
        self._receiver.start()

    def stop(self) -> list[str]:
        """The graceful stop: no more receives, the runs in progress given the stop timeout, the rest
        handed back and their messages made visible. Returns the run ids handed back."""
        self.stopping.set()
        deadline = time.monotonic() + self.config.stop_timeout_seconds
        waiting = self.in_progress
        if waiting:
            logger.info(
                "stopping: waiting for the deliveries in progress",
                extra={"in_progress": waiting, "stop_timeout": self.config.stop_timeout_seconds},
            )
        with self._changed:
            while self._held and not self._hurry.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 0.2))
        handed = hand_back_all(self) if self.in_progress else []
        if self._receiver is not None:
            # A long poll in flight is waited for, within the stop timeout: SQS may still hand it
            # messages, which the receiver then makes visible again. Cut off by the exit, it would leave
            # them hidden for the visibility timeout.
            until = min(max(deadline, time.monotonic()), self._receive_until)
            self._receiver.join(max(0.0, until - time.monotonic()))
            if self._receiver.is_alive():
                logger.warning("a receive in flight at the stop timeout: its messages come back late")
        self._sync_protection(idle=True)
        logger.info("container worker stopped", extra={"handed_back": handed})
        return handed

    # --- receiving -------------------------------------------------------------------------------

    def _receive_loop(self) -> None:
        while not self.stopping.is_set():
            if not self._slots.acquire(timeout=0.5):
                continue
            free = 1
            while free < min(self.config.concurrency, 10) and self._slots.acquire(blocking=False):
                free += 1
            self._receive_until = time.monotonic() + self.config.wait_seconds + RECEIVE_SLACK_SECONDS
            try:
                messages = receive_messages(self, free)
            except Exception:
                self._release(free)
                if not self.stopping.is_set():
                    logger.exception("receive from the container queue failed")
                    self.stopping.wait(RECEIVE_ERROR_PAUSE_SECONDS)
                continue
            self._release(free - len(messages))
            if self.stopping.is_set():  # received after the stop began: visible again at once
                release_messages(self, messages)
                self._release(len(messages))
                return
            for message in messages:
                self._begin(message)
            if not messages and self.config.wait_seconds == 0:
                self.stopping.wait(IDLE_SECONDS)

    def _release(self, count: int) -> None:
        for _ in range(max(0, count)):
            self._slots.release()

    def _begin(self, message: Received) -> None:
        with self._lock:
            self._held[message.message_id] = message
            self.fargate.begin(message.message_id)
        self._sync_protection()
        threading.Thread(
            target=self._handle, args=(message,), name=f"container-{message.message_id[:8]}", daemon=True
        ).start()

    def _handle(self, message: Received) -> None:
        try:
            outcome = process_message(self, message)
            if outcome is not None:
                with self._lock:
                    self.outcomes.append(outcome)
        finally:
            with self._changed:
                self._held.pop(message.message_id, None)
                self._changed.notify_all()
            self._slots.release()
            if not self.stopping.is_set():
                self._sync_protection()

    # --- scale-in protection ---------------------------------------------------------------------

    def _renew_interval(self) -> float:
        return min(self.protection.renew_seconds, 60.0)

    def _sync_protection(self, *, idle: bool | None = None) -> None:
        """Protected while a delivery is in progress (renewed every half of its length), cleared when
        none is (``idle``: force the cleared state, at the end of a stop). One call at a time, each
        reading the state then: the last call leaves the protection as the loop is."""
        if not self.protection.active:
            return
        with self._protection_lock:
            busy = self.in_progress > 0 if idle is None else not idle
            protected_at = self._protected_at
            if busy and (
                protected_at is None or time.monotonic() - protected_at >= self.protection.renew_seconds
            ):
                self._protected_at = time.monotonic() if self.protection.protect() else None
            elif not busy and protected_at is not None:
                self.protection.clear()
                self._protected_at = None


# --- the loop's AWS calls (attributed to ``container_worker`` by the IAM recorder) --------------------


def receive_messages(loop: ContainerWorker, count: int) -> list[Received]:
    """Up to ``count`` messages of the container queue (a long poll)."""
    return loop.consumer.receive(count, loop.config.wait_seconds)


def process_message(loop: ContainerWorker, message: Received) -> Outcome | None:
    """One message through the worker path, deleted unless its outcome is deferred; None when its
    handling raised (left to SQS's redrive)."""
    delivery = Delivery(
        message_id=message.message_id,
        body=message.body,
        receipt_handle=message.receipt_handle,
        queue_url=loop.consumer.queue_url,
        receive_count=message.receive_count,
    )
    try:
        with obs.run_log_keys(**obs.log_keys_of(message.body)):
            try:
                outcome = loop.deliveries.handle(
                    delivery, loop.clock.now(), remaining_seconds=REMAINING_SECONDS
                )
            except Exception:  # retried by SQS, then redriven to the DLQ (the DLQ consumer records it)
                logger.exception("run delivery failed", extra={"message_id": message.message_id})
                return None
            logger.info(
                "run delivery handled",
                extra={"message_id": message.message_id, "outcome": outcome.status, **outcome.detail},
            )
            if not outcome.defer:
                loop.consumer.delete(message.receipt_handle)
    finally:
        loop.fargate.end(message.message_id, message.body)
    loop.deliveries.flush_usage()
    if loop.metrics is not None:
        loop.metrics.flush()
    return outcome


def release_messages(loop: ContainerWorker, messages: list[Received]) -> None:
    """Make received messages visible again at once (received as the stop began: not handled here)."""
    for message in messages:
        loop.consumer.set_visibility(message.receipt_handle, 0)


def hand_back_all(loop: ContainerWorker) -> list[str]:
    """Hand back every run still in progress and make every message still held visible at once."""
    handed = loop.deliveries.worker.hand_back(loop.clock.now())
    with loop._lock:
        held = list(loop._held.values())
    for message in held:
        loop.consumer.set_visibility(message.receipt_handle, 0)
    logger.warning(
        "stop timeout reached: runs handed back, messages visible again",
        extra={"handed_back": handed, "messages": len(held)},
    )
    return handed


# --- assembly --------------------------------------------------------------------------------------


def worker_path(
    settings: Settings,
    clients: Clients,
    clock: Clock,
    owner: str,
    metrics: _Metrics,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
) -> Deliveries[Worker]:
    """The worker function's path (:func:`worker_from_settings`), built in the loop's context, with the
    loop's lease."""
    return worker_from_settings(settings, clients, clock, owner, metrics=metrics, lease_seconds=lease_seconds)


def owner_id() -> str:
    """This process's lease owner: host, process and a random part (a restarted process is another)."""
    return f"container:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def container_worker_from_settings(
    settings: Settings,
    clients: Clients,
    *,
    config: LoopConfig | None = None,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    owner: str | None = None,
) -> ContainerWorker:
    """The loop over the deployment the settings name: the worker path built as the worker function
    builds it (:func:`worker_from_settings`), the container queue, the task's protection."""
    env = os.environ if environ is None else environ
    task_size = task_size_from_env(env)  # before anything is built: a bad size stops the start
    for module in settings.handler_modules:
        importlib.import_module(module)
    clock = clock or SystemClock()
    config = config or LoopConfig()
    metrics = _Metrics()
    deliveries = worker_path(settings, clients, clock, owner or owner_id(), metrics, config.lease_seconds)
    dynamo_meter = deliveries.worker.attempts.dynamo.meter
    consumer = QueueConsumer(clients.sqs, settings.queue_urls[CONTAINER_KIND], dynamo_meter)
    protection = TaskProtection.from_env(env)
    return ContainerWorker(
        deliveries,
        consumer,
        clock,
        config=config,
        protection=protection,
        metrics=metrics,
        fargate=FargateTime(task_size, dynamo_meter),
    )
