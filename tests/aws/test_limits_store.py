"""Semaphores and token buckets in the Leases table (the in-memory fakes, reached as a DynamoDB client
so the turnstile can gate each request), racing workers in deterministic interleavings
(tests/aws/turnstile.py: one DynamoDB request at a time, the order drawn per seed)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.limits_store import MAX_WAITERS, Buckets, Semaphores, bucket_key, semaphore_key
from jobsched.aws.metering import dynamo_for
from jobsched.aws.sizing import Meter
from jobsched.core.limits import RateSpec
from tests.aws.conftest import T0
from tests.aws.memory import memory_aws_units  # noqa: F401  (on the fakes, as a DynamoDB client)
from tests.aws.turnstile import GatedClient, Turnstile

KEY = semaphore_key("acme", "stripe")
SEEDS = range(12)


def semaphores(aws, turnstile=None):
    client = aws.clients.dynamodb if turnstile is None else GatedClient(aws.clients.dynamodb, turnstile)
    return Semaphores(dynamo_for(aws.settings, client), aws.settings.leases_table)


def test_a_semaphore_admits_up_to_its_limit_and_a_release_frees_a_slot(aws):
    """Given a limit of 2, when three holders ask, then the third is refused until one releases."""
    sem = semaphores(aws)
    assert sem.acquire(KEY, "r1@w", 2, T0, 60) is None
    assert sem.acquire(KEY, "r2@w", 2, T0, 60) is None
    refusal = sem.acquire(KEY, "r3@w", 2, T0, 60)
    assert refusal is not None and refusal.frees_in == 60.0 and not refusal.registered
    assert sem.release(KEY, "r1@w", T0) is None
    assert sem.acquire(KEY, "r3@w", 2, T0, 60) is None
    assert set(sem.holders(KEY)) == {"r2@w", "r3@w"}


def test_a_holder_asking_again_keeps_its_one_slot(aws):
    """Given a holder, when it acquires again (a duplicate delivery of the same worker), then it
    still holds one slot and the limit is not reached by it twice."""
    sem = semaphores(aws)
    assert sem.acquire(KEY, "r1@w", 2, T0, 60) is None
    assert sem.acquire(KEY, "r1@w", 2, T0, 60) is None
    assert sem.acquire(KEY, "r2@w", 2, T0, 60) is None
    assert len(sem.holders(KEY)) == 2


def test_a_crashed_holders_slot_returns_when_its_lease_ends(aws):
    """Given a holder that never releases (its worker died), when another run asks before and after
    the lease ends, then it is refused before and takes the slot after; the dead holder's late
    heartbeat finds its slot gone and the semaphore full."""
    sem = semaphores(aws)
    assert sem.acquire(KEY, "dead@w1", 1, T0, 60) is None
    early = sem.acquire(KEY, "r2@w2", 1, T0 + timedelta(seconds=30), 60)
    assert early is not None and early.frees_in == 30.0
    assert sem.acquire(KEY, "r2@w2", 1, T0 + timedelta(seconds=60), 60) is None
    assert set(sem.holders(KEY)) == {"r2@w2"}
    assert sem.renew(KEY, "dead@w1", 1, T0 + timedelta(seconds=61), 60) is False


def test_the_heartbeat_renews_a_slot(aws):
    """Given a holder renewed at 50 s, when another asks at 70 s, then the slot is still held."""
    sem = semaphores(aws)
    assert sem.acquire(KEY, "r1@w", 1, T0, 60) is None
    assert sem.renew(KEY, "r1@w", 1, T0 + timedelta(seconds=50), 60) is True
    assert sem.acquire(KEY, "r2@w", 1, T0 + timedelta(seconds=70), 60) is not None


def test_a_release_wakes_the_oldest_waiter_once(aws):
    """Given two runs registered as waiters on a full semaphore, when the holder releases, then the
    first registered is handed back (its queue and receipt) and taken off; a second release hands
    back the other; a third finds nobody."""
    sem = semaphores(aws)
    assert sem.acquire(KEY, "h1@w", 2, T0, 60) is None
    assert sem.acquire(KEY, "h2@w", 2, T0, 60) is None
    first = sem.acquire(KEY, "a@w", 2, T0, 60, waiter=("a", "q-url", "receipt-a"))
    second = sem.acquire(KEY, "b@w", 2, T0 + timedelta(seconds=1), 60, waiter=("b", "q-url", "receipt-b"))
    assert first is not None and first.registered and second is not None and second.registered
    woken = sem.release(KEY, "h1@w", T0 + timedelta(seconds=2))
    assert (woken.run_id, woken.queue_url, woken.receipt_handle) == ("a", "q-url", "receipt-a")
    assert sem.release(KEY, "h2@w", T0 + timedelta(seconds=2)).run_id == "b"
    assert sem.acquire(KEY, "x@w", 2, T0, 60) is None
    assert sem.release(KEY, "x@w", T0 + timedelta(seconds=2)) is None


def test_a_waiter_that_takes_a_slot_leaves_the_waiters(aws):
    """Given a registered waiter, when it acquires (woken, or its lease check), then it is no longer
    a waiter: the next release wakes nobody."""
    sem = semaphores(aws)
    assert sem.acquire(KEY, "h@w", 1, T0, 60) is None
    assert sem.acquire(KEY, "a@w", 1, T0, 60, waiter=("a", "q", "r")).registered
    assert sem.acquire(KEY, "a@w", 1, T0 + timedelta(seconds=61), 60, waiter=("a", "q", "r")) is None
    assert sem.release(KEY, "a@w", T0 + timedelta(seconds=62)) is None


def test_waiters_are_bounded(aws):
    """Given MAX_WAITERS registered waiters, when one more run waits, then it is refused without
    registering (it re-checks when the first lease ends), and the item stays small."""
    sem = semaphores(aws)
    assert sem.acquire(KEY, "h@w", 1, T0, 60) is None
    for i in range(MAX_WAITERS):
        assert sem.acquire(KEY, f"r{i}@w", 1, T0, 60, waiter=(f"r{i}", "q", "r")).registered
    extra = sem.acquire(KEY, "late@w", 1, T0, 60, waiter=("late", "q", "r"))
    assert extra is not None and not extra.registered


# --- racing workers --------------------------------------------------------------------------------


def holder_loop(sem, name, limit, holds, state, *, lease=60.0):
    """One worker: take a slot ``holds`` times (retrying when refused), hold it across one heartbeat,
    release it. ``state`` counts holders at once (only one raced thread runs at a time)."""
    done = tries = 0
    while done < holds and tries < 200:
        tries += 1
        if sem.acquire(KEY, f"{name}-{done}@{name}", limit, T0, lease) is not None:
            continue
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        sem.renew(KEY, f"{name}-{done}@{name}", limit, T0, lease)
        state["now"] -= 1
        sem.release(KEY, f"{name}-{done}@{name}", T0)
        done += 1
    return done


@pytest.mark.parametrize("seed", SEEDS)
def test_racing_workers_never_hold_more_than_the_limit(aws, seed):
    """Given 6 workers racing for a semaphore of 2, each taking it 3 times, when their requests
    interleave in the order of this seed, then at most 2 hold it at any moment, each gets its 3
    turns, and nothing is left held."""
    turnstile = Turnstile(seed)
    sem = semaphores(aws, turnstile)
    state = {"now": 0, "max": 0}
    results = turnstile.race({f"w{i}": lambda i=i: holder_loop(sem, f"w{i}", 2, 3, state) for i in range(6)})
    assert state["max"] == 2
    assert results == {f"w{i}": 3 for i in range(6)}
    assert semaphores(aws).holders(KEY) == {}


class NaiveSemaphore:
    """Read the holders, then write them back if there is room: the race the conditions prevent."""

    def __init__(self, sem):
        self.sem = sem

    def acquire(self, key, holder, limit, now, lease):
        item = self.sem.dynamo.get(self.sem.table, {"lease_key": key}, consistent=True) or {}
        holders = item.get("holders", {})
        if len(holders) >= limit:
            return "refused"
        self.sem.dynamo.put(self.sem.table, {"lease_key": key, "holders": {**holders, holder: 1}})
        return None

    def renew(self, *args):
        self.sem.dynamo.get(self.sem.table, {"lease_key": KEY}, consistent=True)

    def release(self, key, holder, now):
        item = self.sem.dynamo.get(self.sem.table, {"lease_key": key}, consistent=True) or {}
        holders = {h: v for h, v in item.get("holders", {}).items() if h != holder}
        self.sem.dynamo.put(self.sem.table, {"lease_key": key, "holders": holders})


def test_the_interleavings_catch_a_read_then_write_semaphore(aws):
    """Given the same race against a semaphore that reads then writes (no condition), when the seeds
    are replayed, then some interleaving lets 3 or more hold a limit of 2: the harness finds races."""
    worst = 0
    for seed in range(6):
        turnstile = Turnstile(seed)
        naive = NaiveSemaphore(semaphores(aws, turnstile))
        naive.sem.dynamo.delete(naive.sem.table, {"lease_key": KEY})
        state = {"now": 0, "max": 0}
        bodies = {f"w{i}": lambda i=i, n=naive, s=state: holder_loop(n, f"w{i}", 2, 2, s) for i in range(6)}
        turnstile.race(bodies)
        worst = max(worst, state["max"])
    assert worst > 2


@pytest.mark.parametrize("seed", range(4))
def test_racing_bookings_keep_to_the_rate(aws, seed):
    """Given 5 workers each booking 20 runs at the same instant on a bucket of 10/s with a burst of 5,
    when their writes interleave, then every booking that landed has its own GCRA slot: at most
    10 * 1 + 5 starts in any second; the ones contention kept out say so (None) and took nothing."""
    turnstile = Turnstile(seed)
    client = GatedClient(aws.clients.dynamodb, turnstile)
    spec = RateSpec("stripe", 10.0, 5)
    key = bucket_key("acme", "stripe")
    buckets = [Buckets(dynamo_for(aws.settings, client), aws.settings.leases_table) for _ in range(5)]
    results = turnstile.race(
        {f"w{i}": lambda b=buckets[i]: [b.take(key, spec, T0) for _ in range(20)] for i in range(5)}
    )
    delays = sorted(d for got in results.values() for d in got if d is not None)
    assert len(delays) >= 60
    assert delays[:5] == [0.0] * 5
    for left in [i / 10 for i in range(0, 100)]:
        assert sum(left <= d < left + 1 for d in delays) <= 15
    assert len(set(delays[4:])) == len(delays[4:])  # past the burst, one booking per 100 ms slot


@pytest.mark.parametrize("seed", range(4))
def test_racing_bookings_all_land_without_waiting_for_each_other(aws, seed):
    """Given 8 workers each booking 25 runs at the same instant on a bucket of 5/s with a burst of 1
    (a backlog far past what a minute holds, as a backfill makes), when their writes interleave, then
    every take lands (none is sent back to wait a second for contention), each in one write once the
    bucket is in use, and the 200 bookings are the 200 GCRA slots 200 ms apart from now on."""
    turnstile = Turnstile(seed)
    client = GatedClient(aws.clients.dynamodb, turnstile)
    spec = RateSpec("stripe", 5.0, 1)
    key = bucket_key("acme", "stripe")
    meter = Meter()
    buckets = [Buckets(dynamo_for(aws.settings, client, meter), aws.settings.leases_table) for _ in range(8)]
    results = turnstile.race(
        {f"w{i}": lambda b=buckets[i]: [b.take(key, spec, T0) for _ in range(25)] for i in range(8)}
    )
    taken = [d for got in results.values() for d in got]
    assert taken.count(None) == 0
    delays = sorted(taken)
    assert delays == [round(i * 0.2, 3) for i in range(200)]
    # past the first take of each worker, one write per token
    assert meter.requests["dynamodb.UpdateItem"] <= 200 + 2 * 8
