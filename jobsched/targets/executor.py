"""Run a target under a timeout, with a heartbeat thread beside it.

Python cannot kill a thread. A handler runs in a daemon worker thread; when its timeout passes the
attempt fails with :class:`TimeoutExceeded` (retryable), the run's cancellation flag is set so a
cooperative handler (one that checks ``ctx.cancelled`` or ``ctx.heartbeat()``) stops at its next safe
point, and the thread is abandoned: it may keep running until the Lambda invocation ends, and any
result it produces is ignored (the attempt is already recorded as failed, and fencing rejects writes
for it). The Lambda's remaining time bounds the timeout, so an attempt never outlives its invocation.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from jobsched.core.errors import (
    LeaseLostError,
    PermanentError,
    RetryableError,
    TimeoutExceeded,
    ValidationError,
)
from jobsched.targets.context import JobContext
from jobsched.targets.registry import get_handler
from jobsched.targets.webhook import WebhookTarget, call_webhook

T = TypeVar("T")
logger = logging.getLogger(__name__)


@dataclass
class _Outcome:
    value: Any = None
    error: BaseException | None = None
    done: bool = False


def run_with_timeout(
    fn: Callable[[], T],
    *,
    timeout_seconds: float,
    cancel_event: threading.Event,
    name: str = "jobsched-target",
) -> T:
    """Call ``fn()`` in a daemon thread and return its result or re-raise its exception.

    If it has not finished within ``timeout_seconds``, set ``cancel_event`` and raise
    :class:`TimeoutExceeded`; the thread is abandoned (see the module docstring).
    """
    outcome = _Outcome()

    def target() -> None:
        try:
            outcome.value = fn()
        except BaseException as exc:  # handed to the caller's thread, re-raised there
            outcome.error = exc
        finally:
            outcome.done = True

    # In a copy of the caller's context: the run's log keys (and any other context) follow the handler.
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target,), name=name, daemon=True)
    thread.start()
    thread.join(max(timeout_seconds, 0.0))
    if not outcome.done:
        cancel_event.set()
        raise TimeoutExceeded(f"the target did not finish within {timeout_seconds:g}s")
    if outcome.error is not None:
        raise outcome.error
    return outcome.value


def execute_target(
    target: dict,
    payload: Any,
    ctx: JobContext,
    *,
    timeout_seconds: float,
    allowed_hosts: Iterable[str] = (),
) -> Any:
    """Execute a job's target (``{"handler": name}`` or ``{"http": {...}}``) once under the timeout.

    Returns the output; raises :class:`RetryableError`, :class:`PermanentError`,
    :class:`ValidationError` (an unknown handler or a malformed target, permanent) or whatever the
    handler raised (an unclassified exception, treated as retryable by :func:`is_retryable`).
    """
    if "handler" in target:
        version = target.get("version")  # pinned, or bound by the claim; None: the newest
        handler = get_handler(str(target["handler"]), version if isinstance(version, int) else None)
        call: Callable[[], Any] = lambda: handler(payload if payload is not None else {}, ctx)  # noqa: E731
    elif "http" in target:
        webhook = WebhookTarget.from_dict(target["http"])
        envelope = {
            "run_id": ctx.run_id,
            "job_id": ctx.job_id,
            "attempt": ctx.attempt,
            "scheduled_at": ctx.scheduled_at.isoformat(),
            "payload": payload,
        }
        call = lambda: call_webhook(  # noqa: E731
            webhook,
            run_id=ctx.run_id,
            attempt=ctx.attempt,
            envelope=envelope,
            allowed_hosts=allowed_hosts,
            timeout_seconds=timeout_seconds,
        )
    else:
        raise ValidationError("target must be {'handler': name} or {'http': {...}}", field="target")
    return run_with_timeout(call, timeout_seconds=timeout_seconds, cancel_event=ctx.cancel_event)


def is_retryable(exc: BaseException) -> bool:
    """Classify a failure: permanent for :class:`PermanentError` and :class:`ValidationError` (bad
    input or an unknown handler cannot get better), retryable for everything else, including
    unexpected exceptions (a bug fixed by a redeploy, a flaky dependency)."""
    if isinstance(exc, RetryableError):
        return True
    return not isinstance(exc, PermanentError | ValidationError)


def error_info(exc: BaseException) -> dict[str, str]:
    """A small, JSON-safe description of a failure for the run's history."""
    code = getattr(exc, "code", None) or ("retryable" if is_retryable(exc) else "permanent")
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return {"type": type(exc).__name__, "code": code, "message": message[:1000]}


class KeptThreads:
    """Daemon threads kept for reuse: :meth:`run` hands ``fn`` to an idle one, or starts one.

    Starting a thread is an OS call made while holding the interpreter lock, and with other threads
    busy it waits for the new thread to be scheduled: the worker's per-record heartbeat thread alone was
    17 % of its time on the CPU in the cost benchmark (docs/decisions/0034). A thread that finishes its
    task waits for the next one, so a process holds as many as it ever ran at once (shared by every
    caller: the embedded mode's worker slots, a Lambda container's invocations one after another);
    daemon, so none holds the process up at exit (as the threads they replace)."""

    def __init__(self, name: str):
        self._name = name
        self._tasks: queue.SimpleQueue[tuple[Callable[[], None], threading.Event]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], None]) -> threading.Event:
        """Run ``fn`` on one of the threads; the event is set when it has returned (or raised: ``fn``
        is expected to handle its own errors, one that escapes is logged)."""
        done = threading.Event()
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        self._tasks.put((fn, done))
        if start:
            threading.Thread(target=self._serve, name=self._name, daemon=True).start()
        return done

    def _serve(self) -> None:
        while True:
            fn, done = self._tasks.get()
            try:
                fn()
            except BaseException:  # one that escapes must not end the thread
                logger.exception("a %s task failed", self._name)
            finally:
                with self._lock:  # idle before done: whoever waited on done finds this thread free
                    self._idle += 1
                done.set()


_HEARTBEAT_THREADS = KeptThreads("jobsched-heartbeat")


class Heartbeat:
    """Calls ``beat()`` every ``interval_seconds`` in a background thread until stopped.

    ``beat`` extends the lease and the message visibility, reads the cancellation flag and writes
    progress (the worker provides it). A :class:`LeaseLostError` from ``beat`` means another worker
    owns the run now: the heartbeat stops, records ``lost`` and sets ``cancel_event`` so the handler
    stops. Other errors are logged and retried at the next beat (a throttled write is not fatal).
    The interval is injectable so tests drive it in milliseconds.
    """

    def __init__(self, beat: Callable[[], None], interval_seconds: float, cancel_event: threading.Event):
        self._beat = beat
        self._interval = interval_seconds
        self._cancel = cancel_event
        self._stop = threading.Event()
        self._done: threading.Event | None = None
        self.lost = False
        self.beats = 0

    def __enter__(self) -> Heartbeat:
        context = contextvars.copy_context()  # its log lines carry the run's keys
        # On a kept thread (one per heartbeat running at once, reused after): see KeptThreads.
        self._done = _HEARTBEAT_THREADS.run(lambda: context.run(self._loop))
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._done is not None:
            self._done.wait(timeout=max(self._interval, 1.0) + 5.0)

    def beat_once(self) -> None:
        """One beat, synchronously (the loop's body)."""
        try:
            self._beat()
            self.beats += 1
        except LeaseLostError:
            self.lost = True
            self._cancel.set()
            self._stop.set()
        except Exception:
            logger.exception("heartbeat failed; retrying at the next beat")

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.beat_once()


class CancelBoard:
    """Reads the cancellation flags of every run a worker is executing, in one batched read per period.

    The heartbeat reads a run's flag too, but only every third of the lease (20 s by default); the
    board makes a cancellation reach ``ctx.cancelled`` within about ``interval_seconds``. Each run is
    read every ``interval_seconds`` while its target runs, and only then: its first read is one
    interval after its target started, so a run that ends sooner pays nothing. One thread serves all
    the worker's runs: once a run's read is due it reads, in one ``read_flags`` call (a BatchGetItem),
    that run and every other falling due before its next tick (every quarter interval), so the runs
    of a batch share a request instead of each making its own (the ten records of a Lambda batch: one
    request a second, not ten; at most four a second however many runs). DynamoDB bills a batch
    per run read, exactly as it billed the GetItems, and ``on_read`` meters each run's read in that
    run's own context (its tenant's usage).

    When a run's flag is seen the board calls its ``on_cancel`` and stops reading it; it also stops
    once the run's ``cancel_event`` is set for another reason (timeout, a lost lease). A failed read is
    logged and tried again one interval later; it never fails a run. The thread starts with the first
    watch and ends when no run is watched. ``interval_seconds <= 0`` disables it (the heartbeat alone).
    """

    def __init__(
        self,
        read_flags: Callable[[list[str]], set[str]],
        interval_seconds: float,
        *,
        on_read: Callable[[bool], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        threaded: bool = True,
    ):
        self._read_flags = read_flags
        self._threaded = threaded  # False: no thread, the caller calls take_due and read_once (tests)
        self.interval = interval_seconds
        self._on_read = on_read
        self._clock = clock
        self._lock = threading.Lock()
        self._watches: dict[int, CancelWatch] = {}
        self._thread: threading.Thread | None = None
        self.requests = 0  # read_flags calls that answered
        # The batched reads run in the context the board was made in (the worker's invocation: its
        # calls are that invocation's, decision 0038), each run's share then in the run's own context.
        self._context = contextvars.copy_context()

    def watch(self, run_id: str, cancel_event: threading.Event, on_cancel: Callable[[], None]) -> CancelWatch:
        """The watch of one run's target: a context manager, entered when the target starts."""
        return CancelWatch(self, run_id, cancel_event, on_cancel)

    def _add(self, watch: CancelWatch) -> None:
        with self._lock:
            watch.due = self._clock() + self.interval
            self._watches[id(watch)] = watch
            if self._thread is None and self._threaded:
                self._thread = threading.Thread(
                    target=self._context.copy().run,
                    args=(self._loop,),
                    name="jobsched-cancel-watch",
                    daemon=True,
                )
                self._thread.start()

    def _remove(self, watch: CancelWatch) -> None:
        with self._lock:
            self._watches.pop(id(watch), None)

    @property
    def tick(self) -> float:
        return self.interval / 4

    def take_due(self) -> list[CancelWatch] | None:
        """The watches to read now (None once no run is watched: the thread ends): none until one is
        due; then the runs due before the next tick join its read, so a run is read up to a quarter
        period early rather than in a request of its own, and keeps its cadence (:meth:`read_once`)."""
        with self._lock:
            for key in [k for k, w in self._watches.items() if w.cancel_event.is_set()]:
                del self._watches[key]
            if not self._watches:
                self._thread = None
                return None
            now = self._clock()
            if all(w.due > now for w in self._watches.values()):
                return []
            return [w for w in self._watches.values() if w.due <= now + self.tick]

    def _loop(self) -> None:
        while (due := self.take_due()) is not None:
            if due:
                self.read_once(due)
            time.sleep(self.tick)

    def read_once(self, watches: list[CancelWatch]) -> None:
        """One batched read of these runs' flags (the loop's body)."""
        try:
            flagged: set[str] | None = self._read_flags([w.run_id for w in watches])
        except Exception:
            for watch in watches:  # one line per run, with its keys: every run's log tells of it
                watch.context.run(
                    logger.exception, "reading the cancellation flag failed; retrying at the next interval"
                )
            flagged = None
        now = self._clock()
        if flagged is not None:
            self.requests += 1
        for position, watch in enumerate(watches):
            # Each run keeps its own cadence (one read per period on average, however early the
            # shared read took it); one that fell behind starts again from now.
            watch.due = watch.due + self.interval if watch.due + self.interval > now else now + self.interval
            if flagged is None:
                continue
            watch.reads += 1
            # Each run's share is metered, and its cancel handled, in the run's own context.
            if self._on_read is not None:
                watch.context.run(self._on_read, position == 0)
            if watch.run_id in flagged:
                watch.seen = True
                self._remove(watch)
                watch.context.run(watch.on_cancel)


class CancelWatch:
    """One run's place on a :class:`CancelBoard` while its target runs (``with board.watch(...)``)."""

    def __init__(
        self, board: CancelBoard, run_id: str, cancel_event: threading.Event, on_cancel: Callable[[], None]
    ):
        self.board = board
        self.run_id = run_id
        self.cancel_event = cancel_event
        self.on_cancel = on_cancel
        self.context = contextvars.copy_context()
        self.due = 0.0
        self.reads = 0
        self.seen = False

    def __enter__(self) -> CancelWatch:
        if self.board.interval > 0:
            self.context = contextvars.copy_context()  # its reads and log lines carry the run's keys
            self.board._add(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.board._remove(self)
