"""The embedded mode's capacity (decision 0055): a queue's ceiling is its poller's slots, resized while
invocations hold them; provisioned concurrency is kept as asked and changes nothing."""

from __future__ import annotations

import threading

import pytest

from jobsched.local.capacity import PollerCapacity, local_policy
from jobsched.local.pollers import QueuePoller, Slots
from jobsched.ports.capacity import CapacityRefused


def poller(kind: str, slots: int) -> QueuePoller:
    return QueuePoller(
        sqs=None,
        queue_url=f"url-{kind}",
        queue_arn=f"arn:{kind}",
        invoke=lambda e: None,
        slots=slots,
        stop=threading.Event(),
        name=kind,
    )


def test_growing_slots_admits_more_at_once_and_shrinking_waits_for_releases():
    slots = Slots(1)
    assert slots.acquire(timeout=0) and not slots.acquire(timeout=0)
    slots.resize(3)
    assert slots.acquire(timeout=0) and slots.acquire(timeout=0) and not slots.acquire(timeout=0)
    slots.resize(1)  # three held: none is taken back, but no new one until two are released
    slots.release()
    slots.release()
    assert not slots.acquire(timeout=0)
    slots.release()
    assert slots.acquire(timeout=0)


def test_the_pollers_slots_are_the_ceilings():
    capacity = PollerCapacity({"default": poller("default", 20), "low": poller("low", 2)})
    assert capacity.kinds() == ("default", "low") and capacity.ceiling("long") is None
    capacity.set_ceiling("default", 60)
    assert capacity.ceiling("default") == 60 and capacity.pollers["default"].slots == 60
    with pytest.raises(CapacityRefused):
        capacity.set_ceiling("low", 0)
    capacity.set_provisioned(40)
    assert capacity.provisioned() == 40


def test_the_local_policy_raises_to_the_max_slots_and_never_below_the_configured_ones():
    policy = local_policy({"default": 20, "low": 2}, {"default": 10, "low": 10}, 40)
    assert policy.queues["default"].cap == 40 and policy.queues["low"].base == 2
    assert local_policy({"default": 20}, {}, 0).queues["default"].cap == 20
