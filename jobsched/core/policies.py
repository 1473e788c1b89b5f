"""The scheduling policies of a job, in one import: misfire, overlap, jitter, retries.

The logic lives in :mod:`jobsched.core.misfire`, :mod:`jobsched.core.overlap` and
:mod:`jobsched.core.retry`; this module adds deterministic jitter and :func:`validate_policies`, the
single check the API runs on a job definition's policy fields, and re-exports the public names so
callers (dispatcher, worker, API) import from one place.
"""

from __future__ import annotations

import hashlib
import math
from datetime import timedelta

from jobsched.core.errors import ValidationError
from jobsched.core.misfire import (
    DEFAULT_MAX_CATCHUP,
    DEFAULT_MAX_INDIVIDUAL_SKIPS,
    DEFAULT_MISFIRE_GRACE,
    DEFAULT_MISFIRE_POLICY,
    DEFAULT_PLAN_LIMIT,
    MISFIRE_POLICIES,
    SKIP_REASON_MISFIRE,
    MisfirePlan,
    SkipSummary,
    plan_misfires,
    validate_misfire,
)
from jobsched.core.overlap import (
    BUFFER,
    CANCEL_REASON_REPLACED,
    DEFAULT_OVERLAP_POLICY,
    ENQUEUE,
    ENQUEUE_AND_CANCEL_PREVIOUS,
    OVERLAP_ACTIONS,
    OVERLAP_POLICIES,
    SKIP,
    SKIP_REASON_OVERLAP,
    OverlapDecision,
    decide_overlap,
    validate_overlap_policy,
)
from jobsched.core.retry import (
    DEFAULT_BASE_SECONDS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_SECONDS,
    PERMANENT,
    RETRYABLE,
    RetryDecision,
    RetryPolicy,
    backoff_ceiling,
    backoff_delay,
    classify_error,
    decide_retry,
    next_retry,
    validate_retry,
)

__all__ = [
    "BUFFER",
    "CANCEL_REASON_REPLACED",
    "DEFAULT_BASE_SECONDS",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_CATCHUP",
    "DEFAULT_MAX_INDIVIDUAL_SKIPS",
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_MISFIRE_GRACE",
    "DEFAULT_MISFIRE_POLICY",
    "DEFAULT_OVERLAP_POLICY",
    "DEFAULT_PLAN_LIMIT",
    "ENQUEUE",
    "ENQUEUE_AND_CANCEL_PREVIOUS",
    "MAX_CATCHUP_LIMIT",
    "MAX_JITTER_SECONDS",
    "MAX_MISFIRE_GRACE_SECONDS",
    "MISFIRE_POLICIES",
    "OVERLAP_ACTIONS",
    "OVERLAP_POLICIES",
    "PERMANENT",
    "RETRYABLE",
    "SKIP",
    "SKIP_REASON_MISFIRE",
    "SKIP_REASON_OVERLAP",
    "MisfirePlan",
    "OverlapDecision",
    "RetryDecision",
    "RetryPolicy",
    "SkipSummary",
    "backoff_ceiling",
    "backoff_delay",
    "classify_error",
    "decide_overlap",
    "decide_retry",
    "jitter_offset",
    "next_retry",
    "plan_misfires",
    "validate_policies",
]

# One hour: jitter spreads load, it is not a delay mechanism; more is almost surely a unit mistake.
MAX_JITTER_SECONDS = 3600
# Same bounds as the job API (jobsched.api.schemas); MAX_CATCHUP_LIMIT stays under DEFAULT_PLAN_LIMIT.
MAX_CATCHUP_LIMIT = 10_000
MAX_MISFIRE_GRACE_SECONDS = 7 * 86_400


def jitter_offset(run_id: str, jitter_seconds: int) -> timedelta:
    """How long after its due instant the run ``run_id`` starts: uniform in [0, ``jitter_seconds``]
    with millisecond resolution, derived from a SHA-256 of the run id.

    Deterministic, so a retried or duplicated dispatch of the same run picks the same instant, and
    independent of process, platform and ``PYTHONHASHSEED``. Callers that need whole seconds (SQS
    ``DelaySeconds``) round the result themselves.
    """
    if isinstance(jitter_seconds, bool) or not isinstance(jitter_seconds, int) or jitter_seconds < 0:
        raise ValidationError(
            f"jitter_seconds must be an integer >= 0, got {jitter_seconds!r}", field="jitter_seconds"
        )
    if jitter_seconds == 0:
        return timedelta(0)
    digest = hashlib.sha256(run_id.encode("utf-8")).digest()
    slots = jitter_seconds * 1000 + 1  # milliseconds 0..jitter*1000, both ends included
    return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % slots)


def validate_policies(
    *,
    misfire_policy: str | None = None,
    misfire_grace_seconds: float | None = None,
    max_catchup: int | None = None,
    overlap_policy: str | None = None,
    jitter_seconds: int | None = None,
    max_attempts: int | None = None,
    backoff_base_seconds: float | None = None,
    backoff_max_seconds: float | None = None,
) -> None:
    """Check a job definition's policy fields; only the ones given (not None) are checked, the retry
    trio against the defaults for the missing ones. Raises :class:`ValidationError` whose message
    names the bad value and the allowed ones, with ``field`` set to the offending field."""
    if misfire_grace_seconds is not None and (
        isinstance(misfire_grace_seconds, bool)
        or not isinstance(misfire_grace_seconds, int | float)
        or not math.isfinite(misfire_grace_seconds)
        or not 0 <= misfire_grace_seconds <= MAX_MISFIRE_GRACE_SECONDS
    ):
        raise ValidationError(
            f"misfire_grace_seconds must be a number between 0 and {MAX_MISFIRE_GRACE_SECONDS} (7 days), "
            f"got {misfire_grace_seconds!r}",
            field="misfire_grace_seconds",
        )
    validate_misfire(policy=misfire_policy, max_catchup=max_catchup)
    if max_catchup is not None and max_catchup > MAX_CATCHUP_LIMIT:
        raise ValidationError(
            f"max_catchup must be at most {MAX_CATCHUP_LIMIT}, got {max_catchup}", field="max_catchup"
        )
    if overlap_policy is not None:
        validate_overlap_policy(overlap_policy)
    if jitter_seconds is not None:
        if isinstance(jitter_seconds, bool) or not isinstance(jitter_seconds, int):
            raise ValidationError(
                f"jitter_seconds must be an integer, got {jitter_seconds!r}", field="jitter_seconds"
            )
        if not 0 <= jitter_seconds <= MAX_JITTER_SECONDS:
            raise ValidationError(
                f"jitter_seconds must be between 0 and {MAX_JITTER_SECONDS}, got {jitter_seconds}",
                field="jitter_seconds",
            )
    if (max_attempts, backoff_base_seconds, backoff_max_seconds) != (None, None, None):
        validate_retry(
            DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts,
            DEFAULT_BASE_SECONDS if backoff_base_seconds is None else backoff_base_seconds,
            DEFAULT_MAX_SECONDS if backoff_max_seconds is None else backoff_max_seconds,
        )
