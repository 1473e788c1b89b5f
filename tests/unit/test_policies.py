"""Jitter, validation of a job's policy fields, and the one-import facade."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsched.core import policies
from jobsched.core.errors import ValidationError
from jobsched.core.policies import jitter_offset, validate_policies

# --- jitter ----------------------------------------------------------------------------------------


def test_jitter_is_the_same_for_the_same_run_id():
    # Given one run id, When the offset is computed twice (a retried dispatch), Then it is identical
    assert jitter_offset("job-1#2026-12-01T09:00:00Z", 30) == jitter_offset("job-1#2026-12-01T09:00:00Z", 30)


def test_jitter_is_a_pinned_value_independent_of_hash_seed():
    # A fixed expectation: the offset derives from SHA-256, not from Python's salted hash()
    assert jitter_offset("run-abc", 60) == timedelta(milliseconds=33_163)  # sha256(b"run-abc")[:8] % 60001


def test_zero_jitter_is_no_offset():
    assert jitter_offset("any", 0) == timedelta(0)


def test_jitter_spreads_runs_over_the_window():
    # Given 2,000 different run ids and a 100 s window
    offsets = [jitter_offset(f"run-{i}", 100).total_seconds() for i in range(2000)]
    # Then they cover the window roughly uniformly: each tenth holds 5%-15% of them
    deciles = [sum(1 for o in offsets if d * 10 <= o < (d + 1) * 10) for d in range(10)]
    assert all(100 <= n <= 300 for n in deciles), deciles


@settings(max_examples=300, deadline=None)
@given(run_id=st.text(min_size=1, max_size=80), jitter=st.integers(0, 3600))
def test_jitter_is_within_zero_and_window(run_id, jitter):
    offset = jitter_offset(run_id, jitter)
    assert timedelta(0) <= offset <= timedelta(seconds=jitter)
    assert offset == jitter_offset(run_id, jitter)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_jitter_is_a_validation_error(bad):
    with pytest.raises(ValidationError):
        jitter_offset("run", bad)


# --- validate_policies -----------------------------------------------------------------------------


def test_valid_policy_fields_pass():
    validate_policies(
        misfire_policy="run_all",
        misfire_grace_seconds=120,
        max_catchup=50,
        overlap_policy="buffer_one",
        jitter_seconds=30,
        max_attempts=5,
        backoff_base_seconds=1.5,
        backoff_max_seconds=600,
    )


def test_largest_allowed_catchup_can_be_planned_with_the_default_limit():
    # Given the largest max_catchup the API accepts, When validated and used to plan, Then no error
    validate_policies(max_catchup=policies.MAX_CATCHUP_LIMIT)
    plan = policies.plan_misfires([], datetime(2026, 12, 1, tzinfo=UTC), policy="run_all", max_catchup=10_000)
    assert plan.fire == []


def test_nothing_given_checks_nothing():
    validate_policies()


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"misfire_policy": "later"}, "misfire_policy", "'later'; allowed: run_once, run_all, skip"),
        ({"misfire_grace_seconds": -5}, "misfire_grace_seconds", "got -5"),
        ({"misfire_grace_seconds": float("inf")}, "misfire_grace_seconds", "7 days"),
        ({"misfire_grace_seconds": 7 * 86_400 + 1}, "misfire_grace_seconds", "between 0 and 604800"),
        ({"max_catchup": 0}, "max_catchup", ">= 1"),
        ({"max_catchup": 10_001}, "max_catchup", "at most 10000"),
        ({"overlap_policy": "queue"}, "overlap_policy", "allowed: allow, skip, buffer_one, replace"),
        ({"jitter_seconds": 3601}, "jitter_seconds", "between 0 and 3600"),
        ({"jitter_seconds": "10"}, "jitter_seconds", "integer"),
        ({"max_attempts": 0}, "max_attempts", "between 1 and 100"),
        ({"backoff_base_seconds": 400}, "backoff_max_seconds", "must be >= backoff_base_seconds"),
        ({"backoff_max_seconds": -1}, "backoff_max_seconds", "between 0 and 86400"),
    ],
)
def test_invalid_field_raises_with_field_and_message(kwargs, field, message):
    with pytest.raises(ValidationError, match=message) as error:
        validate_policies(**kwargs)
    assert error.value.field == field


def test_facade_exports_every_name_it_lists():
    # The dispatcher and worker import from jobsched.core.policies only
    missing = [name for name in policies.__all__ if not hasattr(policies, name)]
    assert missing == []
