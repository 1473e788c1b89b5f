"""Shard leases with fencing tokens, on the in-memory fakes (the Leases table's contract with DynamoDB
is in tests/contract)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.leases import LeaseHeldError, Leases
from jobsched.aws.metering import dynamo_for
from jobsched.core.errors import LeaseLostError
from tests.aws.conftest import T0
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


@pytest.fixture
def leases(aws) -> Leases:
    return Leases(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.leases_table)


def test_first_acquisition_gets_token_one(leases):
    lease = leases.acquire("shard#0", "a", T0)
    assert lease.token == 1 and lease.until == T0 + timedelta(seconds=60)


def test_a_held_lease_is_refused_to_another_owner(leases):
    leases.acquire("shard#0", "a", T0)
    with pytest.raises(LeaseHeldError, match="held by a"):
        leases.acquire("shard#0", "b", T0 + timedelta(seconds=59))


def test_an_expired_lease_is_taken_over_with_a_higher_token(leases):
    first = leases.acquire("shard#0", "a", T0)
    second = leases.acquire("shard#0", "b", T0 + timedelta(seconds=60))
    assert second.token == first.token + 1


def test_check_detects_a_takeover(leases):
    first = leases.acquire("shard#0", "a", T0)
    leases.acquire("shard#0", "b", T0 + timedelta(seconds=61))
    with pytest.raises(LeaseLostError, match="taken over"):
        leases.check(first, T0 + timedelta(seconds=62))


def test_release_lets_the_next_owner_in_at_once(leases):
    first = leases.acquire("shard#0", "a", T0)
    assert leases.release(first, T0 + timedelta(seconds=5))
    assert leases.acquire("shard#0", "b", T0 + timedelta(seconds=5)).token == 2


def test_releasing_a_lease_taken_over_does_nothing(leases):
    first = leases.acquire("shard#0", "a", T0)
    second = leases.acquire("shard#0", "b", T0 + timedelta(seconds=61))
    assert not leases.release(first, T0 + timedelta(seconds=62))
    leases.check(second, T0 + timedelta(seconds=62))  # still b's


# No thread race here: moto evaluates a condition and applies the write without a lock, so two threads
# can both "win" a conditional write in moto (DynamoDB makes each conditional write atomic). The
# interleavings above are the deterministic form of the same races.
