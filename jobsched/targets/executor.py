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
import threading
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
        handler = get_handler(str(target["handler"]))
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
        self._thread: threading.Thread | None = None
        self.lost = False
        self.beats = 0

    def __enter__(self) -> Heartbeat:
        context = contextvars.copy_context()  # its log lines carry the run's keys
        self._thread = threading.Thread(
            target=context.run, args=(self._loop,), name="jobsched-heartbeat", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(self._interval, 1.0) + 5.0)

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


class CancelWatch:
    """Reads a running run's cancellation flag every ``interval_seconds`` while its target runs.

    The heartbeat reads the flag too, but only every third of the lease (20 s by default); this
    watch makes a cancellation reach ``ctx.cancelled`` within about ``interval_seconds``. It only
    reads (``is_cancelled``: a strongly consistent GetItem of the flag, 1 read unit), and only while a
    target runs: it starts with the target and its first read is one interval in, so a run that ends
    sooner pays nothing. When the flag is seen it calls ``on_cancel`` and stops; it also stops once
    ``cancel_event`` is set for another reason (timeout, a lost lease). A failed read is logged and
    tried again at the next interval. ``interval_seconds <= 0`` disables it (the heartbeat alone).
    """

    def __init__(
        self,
        is_cancelled: Callable[[], bool],
        interval_seconds: float,
        cancel_event: threading.Event,
        on_cancel: Callable[[], None],
    ):
        self._is_cancelled = is_cancelled
        self._interval = interval_seconds
        self._cancel = cancel_event
        self._on_cancel = on_cancel
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reads = 0
        self.seen = False

    def __enter__(self) -> CancelWatch:
        if self._interval > 0:
            context = contextvars.copy_context()  # its log lines carry the run's keys
            self._thread = threading.Thread(
                target=context.run, args=(self._loop,), name="jobsched-cancel-watch", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._interval + 5.0)

    def check_once(self) -> bool:
        """One read of the flag (the loop's body); True once the cancellation was seen."""
        try:
            cancelled = self._is_cancelled()
        except Exception:
            logger.exception("reading the cancellation flag failed; retrying at the next interval")
            return False
        self.reads += 1
        if cancelled:
            self.seen = True
            self._on_cancel()
        return cancelled

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            if self._cancel.is_set() or self.check_once():
                return
