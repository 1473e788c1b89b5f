"""Retries: capped exponential backoff with full jitter, attempt limits, and error classification.

After attempt ``k`` (1-based) fails with a retryable error and ``k < max_attempts``, the run waits
``random.uniform(0, min(max_seconds, base_seconds * 2 ** (k - 1)))`` seconds ("full jitter", as in the
AWS Architecture Blog's *Exponential Backoff and Jitter*): retries of many runs that failed together
spread out instead of hammering a recovering dependency in waves. The random source is injected, so
tests and replays are reproducible with a seeded :class:`random.Random`.

Classification (:func:`classify_error`) decides whether retrying can help. Pure: the AWS error codes
are matched as strings on the exception's ``response``, botocore is never imported here.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from jobsched.core.errors import PermanentError, RetryableError, ValidationError

RETRYABLE = "retryable"
PERMANENT = "permanent"

DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_BASE_SECONDS = 2.0
DEFAULT_MAX_SECONDS = 300.0
MAX_ATTEMPTS_LIMIT = 100
# One day: the same bound as the job API and the stored RetrySpec (jobsched.core.models), so any
# stored retry settings build a RetryPolicy.
MAX_BACKOFF_SECONDS_LIMIT = 86_400.0

# AWS error codes that mean "slow down or try again": throttling and transient server-side failures.
RETRYABLE_AWS_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "SlowDown",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "TransactionInProgressException",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "InternalError",
        "InternalFailure",
        "InternalServerError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "EC2ThrottledException",
        "KMSThrottlingException",
    }
)
# AWS error codes that say the request itself is wrong: sending it again cannot succeed.
PERMANENT_AWS_CODES = frozenset(
    {"ValidationException", "ValidationError", "InvalidParameterValue", "InvalidParameterException"}
)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failing run is retried.

    ``max_attempts`` counts every attempt, the first included (1 = never retry). ``base_seconds`` is
    the ceiling of the first backoff; each further retry doubles it, up to ``max_seconds``
    (``base_seconds=0`` retries at once). Bounds match the job API: 1..100 attempts, 0..86400 s.
    Validated on construction: :class:`ValidationError` names the bad field and the allowed range.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_seconds: float = DEFAULT_BASE_SECONDS
    max_seconds: float = DEFAULT_MAX_SECONDS

    def __post_init__(self) -> None:
        validate_retry(self.max_attempts, self.base_seconds, self.max_seconds)


@dataclass(frozen=True)
class RetryDecision:
    """What the worker does after a failed attempt.

    ``action``: ``retry`` (wait ``delay_seconds``, then attempt again) or ``dead_letter``.
    ``classification``: ``retryable`` | ``permanent`` (from :func:`classify_error`).
    ``reason``: for ``dead_letter``, ``permanent`` (retrying cannot help) or ``exhausted``
    (``max_attempts`` reached); None for ``retry``.
    """

    action: str
    classification: str
    delay_seconds: float | None = None
    reason: str | None = None


def validate_retry(max_attempts: object, base_seconds: object, max_seconds: object) -> None:
    """Raise :class:`ValidationError` unless the three retry settings are in range."""
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
        raise ValidationError(f"max_attempts must be an integer, got {max_attempts!r}", field="max_attempts")
    if not 1 <= max_attempts <= MAX_ATTEMPTS_LIMIT:
        raise ValidationError(
            f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, got {max_attempts}",
            field="max_attempts",
        )
    for name, value in (("backoff_base_seconds", base_seconds), ("backoff_max_seconds", max_seconds)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValidationError(f"{name} must be a finite number, got {value!r}", field=name)
        if not 0 <= value <= MAX_BACKOFF_SECONDS_LIMIT:
            raise ValidationError(
                f"{name} must be between 0 and {MAX_BACKOFF_SECONDS_LIMIT:g} seconds, got {value}", field=name
            )
    if max_seconds < base_seconds:  # type: ignore[operator]
        raise ValidationError(
            f"backoff_max_seconds ({max_seconds}) must be >= backoff_base_seconds ({base_seconds})",
            field="backoff_max_seconds",
        )


def backoff_ceiling(policy: RetryPolicy, attempt: int) -> float:
    """The upper bound of the delay after failed attempt ``attempt`` (1-based):
    ``min(max_seconds, base_seconds * 2 ** (attempt - 1))``, without overflow for huge attempts."""
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    exponent = attempt - 1
    if exponent >= 64:  # 2**64 * base exceeds any allowed cap: skip the float overflow.
        return policy.max_seconds
    return min(policy.max_seconds, policy.base_seconds * 2.0**exponent)


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): uniform in [0, ceiling]."""
    return rng.uniform(0.0, backoff_ceiling(policy, attempt))


def next_retry(policy: RetryPolicy, attempt: int, rng: random.Random) -> float | None:
    """The delay before the next attempt after attempt ``attempt`` failed, or None when it was the
    last one allowed (``attempt >= max_attempts``)."""
    if attempt >= policy.max_attempts:
        return None
    return backoff_delay(policy, attempt, rng)


def decide_retry(policy: RetryPolicy, attempt: int, exc: BaseException, rng: random.Random) -> RetryDecision:
    """Combine classification and the attempt budget: permanent errors go straight to the dead
    letters; retryable ones are retried with backoff until ``max_attempts`` is used up."""
    classification = classify_error(exc)
    if classification == PERMANENT:
        return RetryDecision("dead_letter", classification, reason=PERMANENT)
    delay = next_retry(policy, attempt, rng)
    if delay is None:
        return RetryDecision("dead_letter", classification, reason="exhausted")
    return RetryDecision("retry", classification, delay_seconds=delay)


def classify_error(exc: BaseException) -> str:
    """``retryable`` or ``permanent``.

    Permanent: :class:`PermanentError`; any validation error (jobsched's :class:`ValidationError`,
    which also reports an unknown handler, and any exception class named ``ValidationError`` such as
    pydantic's); AWS errors whose code says the request is invalid.
    Retryable: :class:`RetryableError` (timeouts included), :class:`TimeoutError`,
    :class:`ConnectionError`, AWS throttling and transient server errors, and anything else: an
    unknown failure is more often a transient fault than a bug, and ``max_attempts`` bounds the cost
    of being wrong, while dead-lettering at once would drop work a retry could have done.
    An exception group is permanent only when every member is.
    """
    if isinstance(exc, BaseExceptionGroup):
        members = [classify_error(inner) for inner in exc.exceptions]
        return PERMANENT if members and all(m == PERMANENT for m in members) else RETRYABLE
    if isinstance(exc, RetryableError):
        return RETRYABLE
    if isinstance(exc, PermanentError | ValidationError):
        return PERMANENT
    code = _aws_error_code(exc)
    if code is not None:
        if code in PERMANENT_AWS_CODES:
            return PERMANENT
        return RETRYABLE
    if isinstance(exc, TimeoutError | ConnectionError):
        return RETRYABLE
    if any(cls.__name__ == "ValidationError" for cls in type(exc).__mro__):
        return PERMANENT
    return RETRYABLE


def _aws_error_code(exc: BaseException) -> str | None:
    """The ``Error.Code`` of a botocore ``ClientError``-shaped exception, read without botocore."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    error = response.get("Error")
    if not isinstance(error, dict):
        return None
    code = error.get("Code")
    return code if isinstance(code, str) else None
