"""Retries: backoff bounds and determinism, the attempt budget, and error classification."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsched.core.errors import (
    ConflictError,
    PermanentError,
    RetryableError,
    TimeoutExceeded,
    ValidationError,
)
from jobsched.core.retry import (
    RetryDecision,
    RetryPolicy,
    backoff_ceiling,
    backoff_delay,
    classify_error,
    decide_retry,
    next_retry,
)


class ClientErrorShaped(Exception):
    """Carries `response` like botocore's ClientError (core never imports botocore)."""

    def __init__(self, code: str):
        super().__init__(code)
        self.response = {"Error": {"Code": code, "Message": "x"}}


# --- backoff ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(1, 2.0), (2, 4.0), (3, 8.0), (8, 256.0), (9, 300.0), (10_000, 300.0)],
)
def test_ceiling_doubles_from_base_and_stops_at_cap(attempt, ceiling):
    # Given base 2 s and cap 300 s, When attempt `attempt` failed, Then the delay is at most the ceiling
    assert backoff_ceiling(RetryPolicy(max_attempts=100), attempt) == ceiling


def test_backoff_is_reproducible_with_the_same_seed():
    policy = RetryPolicy(max_attempts=10)
    first = [backoff_delay(policy, n, random.Random(42)) for n in range(1, 10)]
    again = [backoff_delay(policy, n, random.Random(42)) for n in range(1, 10)]
    assert first == again


def test_full_jitter_spreads_delays_over_the_whole_range():
    # Given many draws for attempt 4 (ceiling 16 s)
    rng = random.Random(7)
    delays = [backoff_delay(RetryPolicy(max_attempts=10), 4, rng) for _ in range(2000)]
    # Then they cover [0, 16] roughly uniformly: both low and high quarters are populated, mean near 8
    assert min(delays) < 1.0 and max(delays) > 15.0
    assert 7.0 < sum(delays) / len(delays) < 9.0


@settings(max_examples=300, deadline=None)
@given(
    attempt=st.integers(1, 2000),
    base=st.floats(0.001, 100.0),
    extra=st.floats(0.0, 1000.0),
    seed=st.integers(0, 2**32),
)
def test_backoff_is_within_zero_and_capped_exponential(attempt, base, extra, seed):
    policy = RetryPolicy(max_attempts=100, base_seconds=base, max_seconds=base + extra)
    delay = backoff_delay(policy, attempt, random.Random(seed))
    assert 0.0 <= delay <= min(policy.max_seconds, base * 2.0 ** min(attempt - 1, 1000))


def test_zero_base_retries_at_once():
    # Given base 0 (allowed by the job API), When an attempt fails, Then the retry waits 0 s
    policy = RetryPolicy(base_seconds=0, max_seconds=0)
    assert next_retry(policy, 1, random.Random(5)) == 0.0


def test_attempt_zero_is_rejected():
    with pytest.raises(ValueError, match="1-based"):
        backoff_ceiling(RetryPolicy(), 0)


# --- attempt budget --------------------------------------------------------------------------------


@pytest.mark.parametrize(("attempt", "retries"), [(1, True), (2, True), (3, False), (4, False)])
def test_next_retry_until_max_attempts(attempt, retries):
    # Given max_attempts=3, When attempt `attempt` fails, Then a delay is returned only before the last
    delay = next_retry(RetryPolicy(max_attempts=3), attempt, random.Random(1))
    assert (delay is not None) is retries


def test_single_attempt_policy_never_retries():
    assert next_retry(RetryPolicy(max_attempts=1), 1, random.Random(1)) is None


def test_decide_retry_sends_permanent_errors_straight_to_dead_letters():
    decision = decide_retry(RetryPolicy(max_attempts=5), 1, PermanentError("bad input"), random.Random(1))
    assert decision == RetryDecision("dead_letter", "permanent", reason="permanent")


def test_decide_retry_dead_letters_when_attempts_are_exhausted():
    decision = decide_retry(RetryPolicy(max_attempts=2), 2, TimeoutError(), random.Random(1))
    assert decision == RetryDecision("dead_letter", "retryable", reason="exhausted")


def test_decide_retry_retries_with_the_backoff_delay():
    decision = decide_retry(RetryPolicy(max_attempts=3), 1, RetryableError("busy"), random.Random(3))
    assert decision.action == "retry"
    assert decision.delay_seconds == backoff_delay(RetryPolicy(max_attempts=3), 1, random.Random(3))


# --- classification --------------------------------------------------------------------------------


class PydanticLikeValidationError(ValueError):
    pass


PydanticLikeValidationError.__name__ = "ValidationError"


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RetryableError("dependency down"), "retryable"),
        (TimeoutExceeded("over 30 s"), "retryable"),
        (TimeoutError(), "retryable"),
        (ConnectionResetError(), "retryable"),
        (ClientErrorShaped("ThrottlingException"), "retryable"),
        (ClientErrorShaped("ProvisionedThroughputExceededException"), "retryable"),
        (ClientErrorShaped("ServiceUnavailable"), "retryable"),
        (PermanentError("4xx from webhook"), "permanent"),
        (ValidationError("unknown handler 'x'"), "permanent"),
        (PydanticLikeValidationError("field required"), "permanent"),
        (ClientErrorShaped("ValidationException"), "permanent"),
        (RuntimeError("something unexpected"), "retryable"),
        (ConflictError("not a handler error"), "retryable"),
        (ExceptionGroup("all bad", [PermanentError("a"), ValidationError("b")]), "permanent"),
        (ExceptionGroup("mixed", [PermanentError("a"), TimeoutError()]), "retryable"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v,
)
def test_classify_error(exc, expected):
    assert classify_error(exc) == expected


def test_malformed_response_attribute_is_not_mistaken_for_aws_error():
    exc = PermanentError("x")
    exc.response = {"Error": "not a dict"}  # type: ignore[attr-defined]
    assert classify_error(exc) == "permanent"


# --- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 101}, "max_attempts"),
        ({"max_attempts": 2.5}, "max_attempts"),
        ({"base_seconds": -1}, "backoff_base_seconds"),
        ({"base_seconds": float("nan")}, "backoff_base_seconds"),
        ({"max_seconds": float("inf")}, "backoff_max_seconds"),
        ({"max_seconds": 86_401}, "backoff_max_seconds"),
        ({"base_seconds": 10, "max_seconds": 5}, "backoff_max_seconds"),
    ],
)
def test_invalid_retry_policy_raises_naming_the_field(kwargs, field):
    with pytest.raises(ValidationError) as error:
        RetryPolicy(**kwargs)
    assert error.value.field == field
