"""Running one workflow step (plan, chunk or completion) and answering its task token.

:func:`run_step` runs the user's function under a timeout
(:func:`~jobsched.targets.executor.run_with_timeout`) with a heartbeat thread that sends
``SendTaskHeartbeat`` and calls ``renew`` (visibility, the run's lease, the cancel flag). A task
Step Functions no longer knows (timed out, already answered) stops the heartbeat: the step's result
would be refused anyway, and the workflow retries the task on its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobsched.core.errors import LeaseLostError
from jobsched.long_jobs.asl import PERMANENT_ERROR, RETRYABLE_ERROR
from jobsched.ports.state_machine import StateMachine, TaskGone
from jobsched.targets.executor import Heartbeat, error_info, is_retryable, run_with_timeout

logger = logging.getLogger(__name__)

MAX_CAUSE_CHARS = 32_768


@dataclass
class StepResult:
    value: Any = None
    error: BaseException | None = None
    cancelled: bool = False  # the run was cancelled (seen by the heartbeat)
    lost: bool = False  # the task or the run is no longer ours


def run_step(
    fn: Callable[[], Any],
    *,
    sfn: StateMachine,
    task_token: str,
    renew: Callable[[], None],
    interval_seconds: float,
    timeout_seconds: float,
    cancel_event: threading.Event,
    cancel_seen: threading.Event,
) -> StepResult:
    """Call ``fn()`` under ``timeout_seconds`` while heartbeating every ``interval_seconds``."""

    def beat() -> None:
        try:
            sfn.send_task_heartbeat(task_token)
        except TaskGone as exc:
            raise LeaseLostError("Step Functions no longer waits for this task") from exc
        renew()

    result = StepResult()
    heartbeat = Heartbeat(beat, interval_seconds, cancel_event)
    with heartbeat:
        try:
            result.value = run_with_timeout(fn, timeout_seconds=timeout_seconds, cancel_event=cancel_event)
        except Exception as exc:  # classified by the caller: retryable or permanent
            result.error = exc
    result.cancelled = cancel_seen.is_set()
    result.lost = heartbeat.lost
    return result


def answer_success(sfn: StateMachine, task_token: str, output: Any) -> bool:
    """``SendTaskSuccess``; False when the task is gone (answered before, or timed out)."""
    return sfn.send_task_success(task_token, output)


def answer_failure(sfn: StateMachine, task_token: str, error: BaseException) -> str:
    """``SendTaskFailure`` classified for the ASL's Retry; returns the error name sent."""
    code = RETRYABLE_ERROR if is_retryable(error) else PERMANENT_ERROR
    info = error_info(error)
    cause = f"{info['type']}: {info['message']}"[:MAX_CAUSE_CHARS]
    sfn.send_task_failure(task_token, code, cause)
    return code
