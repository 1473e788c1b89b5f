"""Demo handlers used by the quickstart, the local mode and the tests.

- ``demo.echo`` returns its payload.
- ``demo.sleep`` sleeps ``payload.seconds`` (default 1), heartbeating with progress (milliseconds slept
  of the total, unit ``ms``), and stops early
  when the run is cancelled or times out.
- ``demo.fail`` raises a retryable (default) or permanent error per ``payload.kind``.
- ``demo.flaky`` fails (retryable) on its first ``payload.failures`` attempts, then succeeds.
"""

from __future__ import annotations

import time
from typing import Any

from jobsched.core.errors import PermanentError, RetryableError, ValidationError
from jobsched.targets.context import JobContext
from jobsched.targets.registry import job


@job("demo.echo")
def echo(payload: dict, ctx: JobContext) -> Any:
    """Return the payload unchanged."""
    return payload


@job("demo.sleep")
def sleep(payload: dict, ctx: JobContext) -> dict:
    """Sleep ``seconds``, reporting progress every tenth of it or every second, whichever is shorter
    (never more often than every 0.01 s); return early, at once, if cancelled. Progress is written with
    the next lease extension (every few seconds), so reporting it more often shows nothing more; it
    cost CPU: with 200 runs sleeping, a report every 0.1 s each was 2,000 wake-ups a second (decision
    0057, issue 31 §7)."""
    seconds = float(payload.get("seconds", 1))
    step = min(1.0, max(seconds / 10, 0.01))
    started = time.monotonic()
    total_ms = round(seconds * 1000)
    while (elapsed := time.monotonic() - started) < seconds:
        if ctx.heartbeat({"done": min(round(elapsed * 1000), total_ms), "total": total_ms, "unit": "ms"}):
            return {"slept": round(elapsed, 3), "cancelled": True}
        ctx.cancel_event.wait(min(step, seconds - elapsed))
    return {"slept": seconds, "cancelled": False}


@job("demo.fail")
def fail(payload: dict, ctx: JobContext) -> None:
    """Raise ``RetryableError`` (``kind: retryable``, the default) or ``PermanentError`` (``permanent``)."""
    kind = payload.get("kind", "retryable")
    message = str(payload.get("message", f"demo.fail asked for a {kind} failure"))
    if kind == "permanent":
        raise PermanentError(message)
    if kind == "retryable":
        raise RetryableError(message)
    problem = f"demo.fail: kind must be 'retryable' or 'permanent', not {kind!r}"
    raise ValidationError(problem, field="payload.kind")


@job("demo.flaky")
def flaky(payload: dict, ctx: JobContext) -> dict:
    """Fail with ``RetryableError`` while ``ctx.attempt <= failures``; then succeed."""
    failures = int(payload.get("failures", 1))
    if ctx.attempt <= failures:
        raise RetryableError(f"demo.flaky: attempt {ctx.attempt} of the {failures} planned failures")
    return {"attempt": ctx.attempt, "failures": failures}
