"""Capacity plans (decision 0055): pre-warm before a forecast peak, raise on age within the cap, hold
while draining, fall back once drained; never below the base, never above the cap."""

from __future__ import annotations

from jobsched.core.capacity import CapacityPolicy, QueueCaps, plan

POLICY = CapacityPolicy(
    queues={"default": QueueCaps(base=10, cap=200), "container": QueueCaps(base=0, cap=8)},
    provisioned_cap=100,
    lead_minutes=10,
    age_threshold_seconds=60,
)


def needs_at(minute: int, value: int) -> list[int]:
    row = [0] * 60
    row[minute] = value
    return row


def test_with_nothing_forecast_each_queue_sits_at_its_base_and_nothing_is_warm():
    chosen = plan(POLICY, {}, {}, {"default": 10, "container": 0})
    assert chosen.ceilings == {"default": 10, "container": 0} and chosen.provisioned == 0


def test_a_peak_within_the_lead_raises_the_ceiling_and_the_warm_capacity_up_to_their_caps():
    chosen = plan(POLICY, {"default": needs_at(8, 150)}, {}, {"default": 10})
    assert chosen.ceilings["default"] == 150 and chosen.provisioned == 100
    assert chosen.reasons["default"] == "forecast"


def test_a_peak_beyond_the_lead_raises_nothing_yet():
    chosen = plan(POLICY, {"default": needs_at(11, 150)}, {}, {"default": 10})
    assert chosen.ceilings["default"] == 10 and chosen.provisioned == 0


def test_a_peak_over_the_cap_is_met_up_to_the_cap():
    assert plan(POLICY, {"default": needs_at(0, 5000)}, {}, {"default": 10}).ceilings["default"] == 200


def test_an_old_due_run_doubles_the_ceiling_each_minute_up_to_the_cap():
    steps = [10]
    for _ in range(6):
        steps.append(plan(POLICY, {}, {"default": 120.0}, {"default": steps[-1]}).ceilings["default"])
    assert steps == [10, 20, 40, 80, 160, 200, 200]


def test_a_young_backlog_holds_the_raised_ceiling_and_a_drained_queue_falls_back():
    held = plan(POLICY, {}, {"default": 5.0}, {"default": 160})
    drained = plan(POLICY, {}, {}, {"default": 160})
    assert (held.ceilings["default"], held.reasons["default"]) == (160, "draining")
    assert drained.ceilings["default"] == 10


def test_the_container_pool_may_go_to_zero_tasks_and_a_mapping_never_below_two():
    policy = CapacityPolicy(queues={"container": QueueCaps(0, 4), "low": QueueCaps(1, 1)})
    chosen = plan(policy, {}, {}, {"container": 3, "low": 1})
    assert chosen.ceilings == {"container": 0, "low": 2}


def test_an_old_container_backlog_starts_a_task_from_zero():
    chosen = plan(POLICY, {}, {"container": 600.0}, {"container": 0})
    assert chosen.ceilings["container"] == 1


def test_needs_in_runs_become_invocations_of_a_batch_each():
    # Given the mapping's invocations run batches of 10 records together
    policy = CapacityPolicy(
        queues={"default": QueueCaps(20, 1000)}, provisioned_cap=1000, runs_per_unit={"default": 10}
    )
    # When 2,000 runs must run at once within the lead
    chosen = plan(policy, {"default": needs_at(5, 2000)}, {}, {"default": 20})
    # Then 200 invocations are allowed and kept warm; 2,001 runs need 201
    assert (chosen.ceilings["default"], chosen.provisioned) == (200, 200)
    assert plan(policy, {"default": needs_at(5, 2001)}, {}, {"default": 20}).ceilings["default"] == 201
