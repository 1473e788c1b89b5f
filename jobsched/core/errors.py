"""The one error tree of jobsched.

Every error the library raises on purpose derives from :class:`JobschedError`. The API maps the
categories to HTTP statuses in one place (validation 400/422, not found 404, conflict 409,
precondition 412, too large 413); the worker maps :class:`RetryableError` and :class:`PermanentError`
to a retry or a dead letter.
"""

from __future__ import annotations


class JobschedError(Exception):
    """Root of every error jobsched raises deliberately."""

    code = "error"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ValidationError(JobschedError):
    """Raised when input is malformed or out of range: an invalid cron field, an unknown time zone,
    an unknown policy or handler, a bad payload. The message names the bad part and what is allowed."""

    code = "validation_error"

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


class PayloadTooLargeError(ValidationError):
    """Raised when a payload, an output or a request body is over its size limit."""

    code = "payload_too_large"


class NotFoundError(JobschedError):
    """Raised when a job, run or dead letter does not exist for the calling tenant (another tenant's
    object is reported exactly like a missing one)."""

    code = "not_found"


class ConflictError(JobschedError):
    """Raised when a request conflicts with the current state: an illegal run state transition, a
    duplicate name, a job that is already paused, a limit reached."""

    code = "conflict"


class PreconditionFailedError(ConflictError):
    """Raised when an optimistic-concurrency check fails: the version given in `If-Match` is stale."""

    code = "precondition_failed"


class BudgetExhaustedError(ConflictError):
    """Raised when a tenant over its monthly budget asks for new runs on demand (a trigger, a backfill,
    a replay or retry of a dead letter): nothing is written (decision 0062, amended)."""

    code = "budget_exhausted"


class UnauthorizedError(JobschedError):
    """Raised when a request carries no identity or one that maps to no tenant."""

    code = "unauthorized"


class ExecutionError(JobschedError):
    """Base of the errors a job's target raises to classify its failure."""

    code = "execution_error"


class RetryableError(ExecutionError):
    """Raised by a handler (or the webhook target) for a transient failure: a timeout, throttling,
    an unavailable dependency. The run is retried with backoff until `max_attempts`; with
    ``retry_after_seconds``, not sooner than that (e.g. a ``Retry-After`` the dependency named)."""

    code = "retryable"

    def __init__(self, message: str, *, retry_after_seconds: float | None = None):
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class PermanentError(ExecutionError):
    """Raised by a handler for a failure that retrying cannot fix (bad input, a 4xx from a webhook).
    The run goes straight to the dead letters."""

    code = "permanent"


class TimeoutExceeded(RetryableError):
    """Raised when a run's target exceeds its `timeout_seconds`."""

    code = "timeout"


class LeaseLostError(JobschedError):
    """Raised when a write for an attempt is rejected because another worker took the run over
    (the fencing check on the attempt number or the lease failed). The stale worker must stop."""

    code = "lease_lost"
