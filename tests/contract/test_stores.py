"""The stores the guarantees rest on, over each backend's Table (the fake and DynamoDB on moto): the
same calls give the same answers. Runs are created once per occurrence, attempts are fenced (a
handed-back one is resumed), shard leases carry increasing fencing tokens, semaphores and token
buckets keep their limits."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from jobsched.aws.attempts import AttemptStore, ClaimStatus
from jobsched.aws.leases import LeaseHeldError, Leases
from jobsched.aws.limits_store import (
    Buckets,
    PoolCeilingItems,
    Semaphores,
    bucket_key,
    epoch_ms,
    semaphore_key,
    share_key,
)
from jobsched.aws.runs_store import RunsStore
from jobsched.core.errors import LeaseLostError
from jobsched.core.limits import RateSpec
from jobsched.core.models import Run, RunState, make_run_id
from jobsched.ports.stores import Binding, PoolCeiling
from tests.aws.conftest import T0


def new_run(at=T0) -> Run:
    return Run(
        id=make_run_id("job1", at),
        job_id="job1",
        tenant="acme",
        scheduled_at=at,
        due_at=at,
        max_attempts=3,
        created_at=at - timedelta(seconds=30),
    )


def test_a_run_is_created_once_per_occurrence(backend):
    runs = RunsStore(backend.table, backend.settings.runs_table)
    first, created = runs.create(new_run())
    again, created_again = runs.create(new_run())
    assert created is True and created_again is False
    assert again.id == first.id and again.state is RunState.QUEUED


def test_an_attempt_is_claimed_once_and_a_stale_owner_cannot_finish_it(backend):
    runs = RunsStore(backend.table, backend.settings.runs_table)
    attempts = AttemptStore(backend.table, backend.settings.runs_table)
    run, _ = runs.create(new_run())
    claim = attempts.claim(run.id, 1, "worker-a", T0, 60)
    assert claim.status == ClaimStatus.CLAIMED
    assert attempts.claim(run.id, 1, "worker-b", T0 + timedelta(seconds=10), 60).status == ClaimStatus.BUSY
    # the lease lapses: worker-b takes the run over as attempt 2, worker-a's late result is refused
    taken = attempts.claim(run.id, 1, "worker-b", T0 + timedelta(seconds=90), 60)
    assert (taken.status, taken.attempt, taken.took_over) == (ClaimStatus.CLAIMED, 2, True)
    with pytest.raises(LeaseLostError):
        attempts.succeed(claim, "worker-a", T0 + timedelta(seconds=91), output={"by": "a"})
    done = attempts.succeed(taken, "worker-b", T0 + timedelta(seconds=92), output={"by": "b"})
    assert done.state is RunState.SUCCEEDED and done.output == {"by": "b"}
    assert [(a.attempt, a.outcome) for a in done.attempts] == [(1, "lost"), (2, "succeeded")]


def test_a_claim_binds_the_handler_version_once_and_each_attempt_records_what_ran_it(backend):
    # Given a queued, unbound run of a handler
    runs = RunsStore(backend.table, backend.settings.runs_table)
    attempts = AttemptStore(backend.table, backend.settings.runs_table)
    run, _ = runs.create(replace(new_run(), handler="report"))
    # When attempt 1 is claimed for version 2 by code "c1", and its lease lapses
    first = attempts.claim(run.id, 1, "worker-a", T0, 60, binding=Binding("report", 2, "c1"))
    # and another worker of code "c2", which would pick version 3, takes it over
    taken = attempts.claim(
        run.id, 1, "worker-b", T0 + timedelta(seconds=90), 60, binding=Binding("report", 3, "c2")
    )
    # Then the run stays bound to version 2 and both attempt entries say which code ran version 2
    assert first.status == ClaimStatus.CLAIMED and first.run is not None and first.run.handler_version == 2
    assert taken.status == ClaimStatus.CLAIMED and taken.run is not None and taken.run.handler_version == 2
    ran = [(a.attempt, a.handler, a.handler_version, a.code_version) for a in taken.run.attempts]
    assert ran == [(1, "report", 2, "c1"), (2, "report", 2, "c2")]


def test_a_claim_of_a_run_bound_to_another_version_claims_it_for_that_version(backend):
    # Given a retrying run bound to version 1 by its first attempt
    runs = RunsStore(backend.table, backend.settings.runs_table)
    attempts = AttemptStore(backend.table, backend.settings.runs_table)
    run, _ = runs.create(new_run())
    first = attempts.claim(run.id, 1, "worker-a", T0, 60, binding=Binding("report", 1, "c1"))
    attempts.retrying(first, "worker-a", T0 + timedelta(seconds=1), T0 + timedelta(seconds=5), "boom")
    # When attempt 2 is claimed by code that would run version 2
    second = attempts.claim(
        run.id, 2, "worker-b", T0 + timedelta(seconds=5), 60, binding=Binding("report", 2, "c2")
    )
    # Then it is claimed for version 1, and its entry says version 1
    assert second.status == ClaimStatus.CLAIMED and second.run is not None
    assert second.run.handler_version == 1 and second.run.attempts[-1].handler_version == 1


def test_a_handed_back_attempt_is_claimed_again_for_the_same_number_and_its_old_owner_is_fenced(backend):
    # Given a run on its last attempt, claimed by worker-a
    runs = RunsStore(backend.table, backend.settings.runs_table)
    attempts = AttemptStore(backend.table, backend.settings.runs_table)
    run, _ = runs.create(replace(new_run(), max_attempts=1))
    claim = attempts.claim(run.id, 1, "worker-a", T0, 60)
    # When worker-a hands it back (a graceful stop) and worker-b receives the message again
    handed = attempts.hand_back(claim, "worker-a", T0 + timedelta(seconds=5))
    again = attempts.claim(run.id, 1, "worker-b", T0 + timedelta(seconds=6), 60)
    # Then the run is still running, free at once, and worker-b holds the same attempt (none used)
    assert handed.state is RunState.RUNNING and handed.lease_owner is None
    assert (again.status, again.attempt, again.took_over) == (ClaimStatus.CLAIMED, 1, False)
    # and worker-a's late writes for that attempt are refused
    with pytest.raises(LeaseLostError):
        attempts.heartbeat(run.id, 1, "worker-a", T0 + timedelta(seconds=7), 60)
    with pytest.raises(LeaseLostError):
        attempts.succeed(claim, "worker-a", T0 + timedelta(seconds=8), output={"by": "a"})
    done = attempts.succeed(again, "worker-b", T0 + timedelta(seconds=9), output={"by": "b"})
    assert done.state is RunState.SUCCEEDED and done.output == {"by": "b"}
    assert [(a.attempt, a.outcome) for a in done.attempts] == [(1, "handed_back"), (1, "succeeded")]


def test_only_the_owner_of_the_attempt_can_hand_it_back(backend):
    # Given a run whose attempt 1 was taken over by worker-b after worker-a's lease lapsed
    runs = RunsStore(backend.table, backend.settings.runs_table)
    attempts = AttemptStore(backend.table, backend.settings.runs_table)
    run, _ = runs.create(new_run())
    stale = attempts.claim(run.id, 1, "worker-a", T0, 60)
    taken = attempts.claim(run.id, 1, "worker-b", T0 + timedelta(seconds=90), 60)
    # When worker-a tries to hand back its old attempt
    with pytest.raises(LeaseLostError):
        attempts.hand_back(stale, "worker-a", T0 + timedelta(seconds=91))
    # Then worker-b still holds attempt 2: another delivery finds the run busy
    busy = attempts.claim(run.id, 1, "worker-c", T0 + timedelta(seconds=92), 60)
    assert (taken.attempt, busy.status, busy.attempt) == (2, ClaimStatus.BUSY, 2)


def test_a_handed_back_takeover_resumes_from_the_message_of_an_older_attempt(backend):
    # Given attempt 2 (a takeover from the message of attempt 1) handed back by worker-b
    runs = RunsStore(backend.table, backend.settings.runs_table)
    attempts = AttemptStore(backend.table, backend.settings.runs_table)
    run, _ = runs.create(new_run())
    attempts.claim(run.id, 1, "worker-a", T0, 60)
    taken = attempts.claim(run.id, 1, "worker-b", T0 + timedelta(seconds=90), 60)
    attempts.hand_back(taken, "worker-b", T0 + timedelta(seconds=95))
    # When the same message (attempt 1) is received by worker-c
    resumed = attempts.claim(run.id, 1, "worker-c", T0 + timedelta(seconds=96), 60)
    # Then worker-c resumes attempt 2; a second resume of it finds the run busy
    assert (resumed.status, resumed.attempt, resumed.took_over) == (ClaimStatus.CLAIMED, 2, False)
    assert attempts.claim(run.id, 1, "worker-d", T0 + timedelta(seconds=97), 60).status == ClaimStatus.BUSY
    outcomes = [(a.attempt, a.outcome) for a in attempts.get(run.id).attempts]
    assert outcomes == [(1, "lost"), (2, "handed_back"), (2, None)]


def test_shard_leases_fence_with_increasing_tokens(backend):
    leases = Leases(backend.table, backend.settings.leases_table)
    first = leases.acquire("shard#0", "a", T0)
    with pytest.raises(LeaseHeldError):
        leases.acquire("shard#0", "b", T0 + timedelta(seconds=30))
    second = leases.acquire("shard#0", "b", T0 + timedelta(seconds=61))
    assert (first.token, second.token) == (1, 2)
    with pytest.raises(LeaseLostError):
        leases.check(first, T0 + timedelta(seconds=62))


def test_a_semaphore_admits_up_to_its_limit(backend):
    semaphores = Semaphores(backend.table, backend.settings.leases_table)
    key = semaphore_key("acme", "stripe")
    assert semaphores.acquire(key, "r1@w", 2, T0, 60) is None
    assert semaphores.acquire(key, "r2@w", 2, T0, 60) is None
    refusal = semaphores.acquire(key, "r3@w", 2, T0, 60)
    assert refusal is not None and refusal.frees_in == pytest.approx(60)
    semaphores.release(key, "r1@w", T0 + timedelta(seconds=1))
    assert semaphores.acquire(key, "r3@w", 2, T0 + timedelta(seconds=2), 60) is None
    assert sorted(semaphores.holders(key)) == ["r2@w", "r3@w"]


def test_a_token_bucket_books_its_burst_at_once_then_one_start_per_interval(backend):
    buckets = Buckets(backend.table, backend.settings.leases_table)
    spec = RateSpec(key=bucket_key("acme", "api"), per_second=2.0, burst=2)
    booked = [buckets.take(spec.key, spec, T0) for _ in range(5)]
    assert booked == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.5])


def test_the_pool_ceiling_item_is_written_and_read_with_a_share_item_in_one_look(backend):
    # Given no ceiling item, a look finds the share item's holders and no ceiling (the base)
    semaphores = Semaphores(backend.table, backend.settings.leases_table)
    items = PoolCeilingItems(backend.table, backend.settings.leases_table, lease_seconds=300)
    key = share_key("default", "acme")
    assert semaphores.acquire(key, "inv-1", 20, T0, 60) is None
    holders, pool = semaphores.look(key, "default")
    assert set(holders) == {"inv-1"} and pool is None
    # When the capacity function sets the ceiling to 40, then renews it a minute later
    items.record("default", 40, T0, changed=True)
    items.record("default", 40, T0 + timedelta(minutes=1), changed=False)
    # Then the look reads it with the share item: set at T0, in force 300 s after the renewal
    holders, pool = semaphores.look(key, "default")
    assert set(holders) == {"inv-1"}
    assert pool == PoolCeiling(40, epoch_ms(T0), epoch_ms(T0 + timedelta(minutes=1)) + 300_000)
    assert pool.in_force(epoch_ms(T0 + timedelta(minutes=6))) is None  # lapsed: the base
    # And a change moves set_at
    items.record("default", 25, T0 + timedelta(minutes=2), changed=True)
    assert items.read("default") == PoolCeiling(
        25, epoch_ms(T0 + timedelta(minutes=2)), epoch_ms(T0 + timedelta(minutes=2)) + 300_000
    )
