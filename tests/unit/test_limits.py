"""The limit arithmetic (jobsched/core/limits.py): spec validation, GCRA bookings, semaphore holders."""

from __future__ import annotations

import pytest

from jobsched.core.errors import ValidationError
from jobsched.core.job_specs import normalize_limit
from jobsched.core.limits import (
    ConcurrencySpec,
    RateSpec,
    book,
    concurrency_from,
    expired_holders,
    live_holders,
    oldest_waiter,
    rate_from,
    slot_frees_in,
    wait_seconds,
)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (None, None),
        ({}, None),
        ({"limit": 3}, ConcurrencySpec("job-1", 3)),
        ({"key": "stripe", "limit": 1}, ConcurrencySpec("stripe", 1)),
        ({"key": "demo.echo", "limit": 1000}, ConcurrencySpec("demo.echo", 1000)),
    ],
)
def test_concurrency_specs_that_are_accepted(data, expected):
    """Given a job's concurrency field, when parsed, then the key defaults to the job id."""
    assert concurrency_from(data, "job-1") == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"limit": 0}, "concurrency.limit must be a whole number between 1 and 1000, got 0"),
        ({"limit": 1.5}, "concurrency.limit must be a whole number between 1 and 1000, got 1.5"),
        ({"limit": True}, "concurrency.limit must be a whole number between 1 and 1000, got True"),
        ({"key": "x"}, "concurrency.limit is required"),
        ({"limit": 2, "scope": "x"}, "unknown concurrency fields: scope"),
        ({"key": "has space", "limit": 2}, "concurrency.key must be 1-128 characters"),
        ({"key": "", "limit": 2}, "concurrency.key must be 1-128 characters"),
        ([1], 'concurrency must be {"key": "...", "limit": N}'),
    ],
)
def test_concurrency_specs_that_are_refused(data, message):
    """Given a malformed concurrency field, when parsed, then a ValidationError says what to fix."""
    with pytest.raises(ValidationError) as raised:
        concurrency_from(data, "job-1")
    assert str(raised.value.message).startswith(message)
    assert raised.value.field == "concurrency"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"per_second": 0}, "rate_limit.per_second must be a number between 0.001 and 1000, got 0"),
        ({"per_second": 5, "burst": 0}, "rate_limit.burst must be a whole number between 1 and 1000, got 0"),
        ({"burst": 3}, "rate_limit.per_second is required"),
        ({"per_second": 1, "window": 3}, "unknown rate_limit fields: window"),
    ],
)
def test_rate_specs_that_are_refused(data, message):
    """Given a malformed rate_limit field, when parsed, then a ValidationError says what to fix."""
    with pytest.raises(ValidationError) as raised:
        rate_from(data, "job-1")
    assert raised.value.message == message


def test_a_rate_spec_defaults_to_a_burst_of_one_and_the_job_key():
    """Given only per_second, when parsed, then burst is 1 and the key the job id."""
    assert rate_from({"per_second": 2.5}, "job-1") == RateSpec("job-1", 2.5, 1)


def test_a_stored_limit_keeps_no_key_when_the_job_named_none():
    """Given a job limit without a key, when normalized, then no key is stored (the job id is filled
    in when a run is sent), and a named key is kept."""
    assert normalize_limit({"limit": 2}, "concurrency") == {"limit": 2}
    assert normalize_limit({"key": "k", "per_second": 1}, "rate_limit") == {
        "key": "k",
        "per_second": 1.0,
        "burst": 1,
    }
    assert normalize_limit(None, "rate_limit") == {}


# --- GCRA -----------------------------------------------------------------------------------------

TWO_PER_SECOND = RateSpec("k", 2.0, 1)


@pytest.mark.parametrize(
    ("spec", "tat", "now", "start", "new_tat"),
    [
        (TWO_PER_SECOND, None, 10_000, 10_000, 10_500),  # never used: starts now
        (TWO_PER_SECOND, 9_000, 10_000, 10_000, 10_500),  # idle (tat in the past): starts now
        (TWO_PER_SECOND, 10_500, 10_000, 10_500, 11_000),  # booked until 10.5 s: starts then
        (TWO_PER_SECOND, 12_000, 10_000, 12_000, 12_500),  # a queue of bookings: after the last
        (RateSpec("k", 2.0, 3), 11_000, 10_000, 10_000, 11_500),  # burst 3: two ahead is still fine
        (RateSpec("k", 2.0, 3), 11_500, 10_000, 10_500, 12_000),  # three ahead: waits half a second
    ],
)
def test_gcra_bookings(spec, tat, now, start, new_tat):
    """Given a bucket's tat at now (epoch ms), when one run books, then it starts at start and the
    bucket moves to new_tat."""
    booking = book(spec, tat, now)
    assert (booking.start_ms, booking.new_tat) == (start, new_tat)


def test_gcra_admits_rate_times_window_plus_burst():
    """Given 1000 runs booking at once on 5/s with a burst of 4, when each books after the other,
    then the starts in any 10 s window number at most 5 * 10 + 4, and the first minute holds
    5 * 60 + 4 - 1 (the last of R * W + B would start on the minute itself)."""
    spec, tat, starts = RateSpec("k", 5.0, 4), None, []
    for _ in range(1000):
        booking = book(spec, tat, 0)
        tat = booking.new_tat
        starts.append(booking.start_ms)
    assert starts[:4] == [0, 0, 0, 0]
    for left in range(0, 100_000, 1000):
        assert sum(left <= s < left + 10_000 for s in starts) <= 54
    assert sum(s < 60_000 for s in starts) == 303


# --- semaphores -----------------------------------------------------------------------------------


def test_holders_whose_lease_ended_are_free():
    """Given holders with lease ends around now, then those at or before now are free."""
    holders = {"a": 1000, "b": 2000, "c": 3000}
    assert live_holders(holders, 2000) == {"c": 3000}
    assert expired_holders(holders, 2000) == {"a": 1000, "b": 2000}
    assert slot_frees_in(holders, 1500) == 0.5
    assert slot_frees_in({}, 1500) == 0.0


def test_the_oldest_live_waiter_wakes_first():
    """Given waiters registered at different times, one lapsed, then the oldest live one is next."""
    waiters = {"r1": {"t": 5, "x": 100}, "r2": {"t": 1, "x": 10}, "r3": {"t": 3, "x": 100}}
    assert oldest_waiter(waiters, 50) == "r3"
    assert oldest_waiter({}, 50) is None


@pytest.mark.parametrize(
    ("frees_in", "cap", "jitter", "expected"),
    [(0.0, 61, 0.0, 1), (10.2, 61, 0.5, 12), (59.5, 61, 0.9, 61), (300.0, 61, 0.0, 61)],
)
def test_wait_seconds(frees_in, cap, jitter, expected):
    """Given when the first lease ends, then a waiting run is hidden until a second after, capped."""
    assert wait_seconds(frees_in, cap=cap, jitter=jitter) == expected
