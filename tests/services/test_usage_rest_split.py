"""Usage that counts the rest (decision 0059 amended): the prices of Step Functions transitions, SNS
publishes and Fargate time, how a task's seconds are split between the runs it holds at once, how a
billed amount is attributed (a tenant named, the lane's, or shared by weight), the deployment row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.compose.fargate_time import FargateTime, task_size_from_env, tenant_of
from jobsched.core.clock import FakeClock
from jobsched.core.prices import US_EAST_1
from jobsched.core.usage import (
    DEPLOYMENT,
    DayUsage,
    TaskTime,
    empty_polls,
    fargate_usage,
    sns_publish_requests,
)
from jobsched.long_jobs.asl import TRANSITIONS_BY_KIND, chunked_job_definition, start_transitions
from jobsched.runtime import observability as obs
from jobsched.runtime.settings import ConfigurationError
from jobsched.services.usage import MappingPolls, TenantMeter, UsageRecorder

T0 = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


# --- prices ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "amount", "usd"),
    [
        ("sfn_transitions", 1000, 0.025),  # $0.025 per 1,000 state transitions
        ("sns_publishes", 1_000_000, 0.50),  # $0.50 per million publishes
        ("fargate_vcpu_seconds", 3600, 0.03238),  # arm64: $0.03238 per vCPU-hour
        ("fargate_gb_seconds", 3600, 0.00356),  # arm64: $0.00356 per GB-hour
    ],
)
def test_each_new_counter_is_priced_at_the_us_east_1_list_price(field, amount, usd):
    usage = DayUsage(tenant="acme", day="2026-12-05", **{field: amount})
    assert usage.estimated_usd(1024) == pytest.approx(usd)
    assert usage.to_dict(1024)["estimated_usd"] == pytest.approx(usd)
    assert usage.to_dict(1024)[field] == amount


def test_the_new_counters_add_to_the_estimate_of_what_was_counted_before():
    before = DayUsage(tenant="acme", day="2026-12-05", wru=10, lambda_gb_seconds=2.0, lambda_requests=3)
    after = DayUsage(**{**before.__dict__, "sfn_transitions": 40.0, "fargate_vcpu_seconds": 60.0})
    assert after.estimated_usd(1024) - before.estimated_usd(1024) == pytest.approx(
        40 * US_EAST_1.sfn_transition + 60 * US_EAST_1.fargate_vcpu_second
    )


@pytest.mark.parametrize(
    ("payload_bytes", "requests"), [(0, 1), (1, 1), (65_536, 1), (65_537, 2), (262_144, 4)]
)
def test_an_sns_publish_is_billed_per_started_64_kb(payload_bytes, requests):
    assert sns_publish_requests(payload_bytes) == requests


@pytest.mark.parametrize(
    ("seconds", "cpu", "memory", "expected"),
    [(10, 1024, 2048, (10.0, 20.0)), (10, 256, 512, (2.5, 5.0)), (-1, 1024, 2048, (0.0, 0.0))],
)
def test_fargate_time_is_vcpu_seconds_and_gb_seconds_of_the_task_size(seconds, cpu, memory, expected):
    assert fargate_usage(seconds, cpu, memory) == expected


def test_a_task_without_a_size_is_refused():
    with pytest.raises(ValueError, match="positive"):
        fargate_usage(1, 0, 2048)


# --- step functions --------------------------------------------------------------------------------


def test_the_transitions_per_message_name_states_of_the_definition():
    """The counting rule refers to states the definition has: Queue (+LongQueue) before the plan, one
    per task message, RecordFailure and Failed for a failure."""
    states = chunked_job_definition("https://q")["States"]
    assert {"Queue", "LongQueue", "Plan", "Chunks", "Complete", "RecordFailure", "Failed"} == set(states)
    assert states["Failed"]["Type"] == "Fail" and states["RecordFailure"]["Next"] == "Failed"
    assert TRANSITIONS_BY_KIND == {"chunk.plan": 1, "chunk.run": 1, "chunk.complete": 1, "chunk.failed": 2}
    assert (start_transitions(True), start_transitions(False)) == (1, 2)


# --- a task's seconds split between the runs it holds at once ---------------------------------------


def test_a_tasks_seconds_are_split_equally_between_the_deliveries_it_holds_at_once():
    """Given a task idle 5 s, then holding a (acme) alone 10 s, a and b (globex) together 20 s, and b
    alone 4 s, Then a's share is 10 + 10, b's 10 + 4, and the 5 idle seconds are apart."""
    time = TaskTime(0.0)
    time.begin("a", 5.0)
    time.begin("b", 15.0)
    assert time.end("a", 35.0) == pytest.approx(20.0)
    assert time.end("b", 39.0) == pytest.approx(14.0)
    assert time.take_idle(39.0) == pytest.approx(5.0)
    assert time.take_idle(41.0) == pytest.approx(2.0)  # idle again since b ended


# --- attribution of billed amounts -----------------------------------------------------------------


def test_a_billed_amount_goes_to_the_tenant_named_else_the_lanes_else_is_shared_by_weight():
    """Given 2 transitions named for acme, 4 GB-seconds of Fargate in globex's lane, and 6 vCPU-seconds
    of idle task time for no one tenant, When the meter settles, Then acme and globex have their own,
    and the idle seconds are split 1:1 by the weights the two amounts gave them."""
    meter = TenantMeter()
    meter.record_billed("sfn_transitions", 2, tenant="acme")
    with obs.request_lane("globex"):
        meter.record_billed("fargate_gb_seconds", 4.0)
    meter.record_billed("fargate_vcpu_seconds", 6.0)

    settled = meter.settle()

    assert settled["acme"]["sfn_transitions"] == 2 and settled["globex"]["sfn_transitions"] == 0
    assert settled["globex"]["fargate_gb_seconds"] == 4.0 and settled["acme"]["fargate_gb_seconds"] == 0
    assert settled["acme"]["fargate_vcpu_seconds"] == pytest.approx(3.0)
    assert settled["globex"]["fargate_vcpu_seconds"] == pytest.approx(3.0)
    assert meter.billed == {"sfn_transitions": 2, "fargate_gb_seconds": 4.0, "fargate_vcpu_seconds": 6.0}


def test_the_recorder_writes_the_billed_amounts_into_the_tenants_day():
    meter = TenantMeter()
    recorder = UsageRecorder(obs.NullSink(), FakeClock(T0), meter)
    meter.record_billed("sns_publishes", 1, tenant="acme")
    meter.record_billed("sfn_transitions", 3, tenant="acme")
    [day] = recorder.take()
    assert (day.tenant, day.day, day.sns_publishes, day.sfn_transitions) == ("acme", "2026-12-05", 1, 3)


def test_a_deployment_meter_counts_everything_on_the_deployment_row_whatever_the_lane_or_items():
    """The capacity function's meter: its reads of acme's jobs and a request made in a lane are all the
    deployment's, and so is its invocation, even with no request at all."""
    meter = TenantMeter(only=DEPLOYMENT)
    meter.record_dynamodb("Query", rcu=2.0)
    meter.record_items([{"tenant": {"S": "acme"}}])
    with obs.request_lane("acme"):
        meter.record_dynamodb("GetItem", rcu=0.5)
    meter.record_invocation(0.2, 256)
    assert set(settled := meter.settle()) == {DEPLOYMENT}
    assert settled[DEPLOYMENT]["rru"] == 2.5 and settled[DEPLOYMENT]["invocations"] == 1
    meter.record_invocation(0.1, 256)  # an invocation that made no request
    assert meter.settle()[DEPLOYMENT]["invocations"] == 1


# --- the deployment row: the mappings' empty polls --------------------------------------------------


def test_empty_polls_are_five_long_polls_per_mapping_every_20_seconds():
    assert empty_polls(9, 86_400) == 9 * 5 * 4320  # 194,400 receives a day: $0.078 at $0.40 a million
    assert empty_polls(0, 60) == 0


def test_the_sweeper_adds_the_polls_since_its_last_sweep_the_first_one_a_period_and_at_most_an_hour():
    polls = MappingPolls(mappings=2, period_seconds=300)
    recorder = UsageRecorder(obs.NullSink(), FakeClock(T0), TenantMeter())
    assert polls.add_to(recorder, T0) == empty_polls(2, 300)
    assert polls.add_to(recorder, T0 + timedelta(seconds=120)) == empty_polls(2, 120)
    assert polls.add_to(recorder, T0 + timedelta(hours=5)) == empty_polls(2, 3600)
    [row] = recorder.take()
    assert row.tenant == DEPLOYMENT and row.sqs_requests == empty_polls(2, 300 + 120 + 3600)


# --- the container loop's inputs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "size"),
    [
        ({}, (1024, 2048)),
        ({"JOBSCHED_CONTAINER_CPU": "512", "JOBSCHED_CONTAINER_MEMORY_MB": "1024"}, (512, 1024)),
        ({"JOBSCHED_CONTAINER_CPU": "0"}, None),
    ],
)
def test_the_task_size_comes_from_the_environment_the_stack_sets(environ, size):
    assert task_size_from_env(environ) == size


@pytest.mark.parametrize("raw", ["one", "-1"])
def test_a_bad_task_size_names_the_variable(raw):
    with pytest.raises(ConfigurationError, match="JOBSCHED_CONTAINER_MEMORY_MB"):
        task_size_from_env({"JOBSCHED_CONTAINER_MEMORY_MB": raw})


@pytest.mark.parametrize(
    ("body", "tenant"),
    [
        ('{"tenant": "acme", "run_id": "r"}', "acme"),
        ('{"kind": "chunk.plan", "run": {"tenant": "globex"}}', "globex"),
        ("not json", None),
        ("[1]", None),
    ],
)
def test_the_tenant_of_a_message_is_the_runs_or_the_workflow_messages(body, tenant):
    assert tenant_of(body) == tenant


def test_two_tenants_runs_held_at_once_share_the_tasks_seconds_and_the_idle_ones_are_shared():
    """Given a 0.5 vCPU / 1 GB task idle 4 s, then holding acme's run alone 10 s, acme's and globex's
    together 20 s, globex's alone 6 s, When each delivery ends (its usage written after it), Then acme
    is counted 20 s and globex 16 s of the task, and the 4 idle seconds go with acme's flush (its
    weight alone then), as vCPU-seconds (x 0.5) and GB-seconds (x 1)."""
    now = [0.0]
    meter = TenantMeter()
    fargate = FargateTime((512, 1024), meter, monotonic=lambda: now[0])
    now[0] = 4.0
    fargate.begin("a")
    now[0] = 14.0
    fargate.begin("b")
    now[0] = 34.0
    fargate.end("a", '{"tenant": "acme", "run_id": "r1"}')
    first = meter.settle()
    now[0] = 40.0
    fargate.end("b", '{"kind": "chunk.complete", "run": {"tenant": "globex"}}')
    second = meter.settle()
    assert first["acme"]["fargate_vcpu_seconds"] == pytest.approx((20 + 4) * 0.5)
    assert first["acme"]["fargate_gb_seconds"] == pytest.approx(20 + 4)
    assert "globex" not in first
    assert second["globex"]["fargate_vcpu_seconds"] == pytest.approx(16 * 0.5)
    assert second["globex"]["fargate_gb_seconds"] == pytest.approx(16)


def test_off_fargate_nothing_is_counted():
    meter = TenantMeter()
    fargate = FargateTime(None, meter)
    fargate.begin("a")
    fargate.end("a", '{"tenant": "acme"}')
    assert meter.billed == {}
