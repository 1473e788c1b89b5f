"""EventBridge Scheduler: one rate(1 minute) tick per shard to the dispatcher; the sweeper's schedule."""

from __future__ import annotations

import json

from infra.dispatch import TICK_MAX_EVENT_AGE_SECONDS, TICK_RETRY_ATTEMPTS


def _schedules(synth) -> list[dict]:
    return [s["Properties"] for s in synth.resources("AWS::Scheduler::Schedule").values()]


def _targeting(synth, function_name: str) -> list[dict]:
    arn = {"Fn::GetAtt": [synth.logical_id(synth.stack.functions[function_name]), "Arn"]}
    return [s for s in _schedules(synth) if s["Target"]["Arn"] == arn]


def test_one_schedule_group_holds_every_schedule(synth):
    synth.assertions.resource_count_is("AWS::Scheduler::ScheduleGroup", 1)
    (group,) = synth.resources("AWS::Scheduler::ScheduleGroup").values()
    assert {s["GroupName"] for s in _schedules(synth)} == {group["Properties"]["Name"]}


def test_one_tick_per_shard_each_naming_its_shard(synth):
    # Given N shards / When listing the dispatcher's schedules / Then shards 0..N-1 each tick once
    ticks = _targeting(synth, "dispatcher")
    shards = sorted(json.loads(t["Target"]["Input"])["shard"] for t in ticks)
    assert shards == list(range(synth.stack.config.shards))


def test_each_tick_names_the_shard_count_its_shard_belongs_to(synth):
    # Given N shards / When reading the ticks' inputs / Then each is {"shard": k, "shards": N}, so a
    # tick follows its own schedule's mapping of due partitions while a deployment changes N
    inputs = [json.loads(t["Target"]["Input"]) for t in _targeting(synth, "dispatcher")]
    assert {i["shards"] for i in inputs} == {synth.stack.config.shards}
    assert all(set(i) == {"shard", "shards"} for i in inputs)


def test_ticks_fire_every_minute(synth):
    assert {t["ScheduleExpression"] for t in _targeting(synth, "dispatcher")} == {"rate(1 minute)"}


def test_ticks_retry_briefly_and_dead_letter_failures(synth):
    dlq = {"Fn::GetAtt": [synth.logical_id(synth.stack.dispatch.schedule_dlq), "Arn"]}
    for tick in _targeting(synth, "dispatcher"):
        target = tick["Target"]
        assert target["RetryPolicy"] == {
            "MaximumEventAgeInSeconds": TICK_MAX_EVENT_AGE_SECONDS,
            "MaximumRetryAttempts": TICK_RETRY_ATTEMPTS,
        }
        assert target["DeadLetterConfig"] == {"Arn": dlq}


def test_sweeper_runs_on_its_own_schedule(synth):
    (sweep,) = _targeting(synth, "sweeper")
    assert sweep["ScheduleExpression"] == f"rate({synth.stack.config.sweeper_rate_minutes} minutes)"
    assert "DeadLetterConfig" in sweep["Target"]


def test_no_function_shortens_the_sweepers_grace_on_aws(synth):
    # JOBSCHED_SWEEPER_GRACE_SECONDS is the embedded mode's (jobsched dev --sweeper-grace-seconds): the
    # stack sets it on no function, so the sweeper keeps its 2-minute grace
    from jobsched.runtime.resources import ENV_SWEEPER_GRACE_SECONDS

    for function in synth.resources("AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        assert ENV_SWEEPER_GRACE_SECONDS not in variables


def test_the_dispatcher_alone_carries_the_backpressure_limits(synth):
    # Given the deployment's backpressure_depth and backpressure_age_seconds / When reading the
    # functions' environments / Then the dispatcher has one depth and one age per priority it may hold
    # back (never high), and no other function needs them
    from jobsched.runtime.resources import ENV_BACKPRESSURE_AGE_PREFIX, ENV_BACKPRESSURE_DEPTH_PREFIX

    def env_of(name: str) -> dict:
        function = synth.resources("AWS::Lambda::Function")[synth.logical_id(synth.stack.functions[name])]
        return function["Properties"]["Environment"]["Variables"]

    dispatcher = env_of("dispatcher")
    assert {k: v for k, v in dispatcher.items() if k.startswith("JOBSCHED_BACKPRESSURE_")} == {
        ENV_BACKPRESSURE_DEPTH_PREFIX + "DEFAULT": "0",
        ENV_BACKPRESSURE_DEPTH_PREFIX + "LOW": "1000",
        ENV_BACKPRESSURE_AGE_PREFIX + "DEFAULT": "0",
        ENV_BACKPRESSURE_AGE_PREFIX + "LOW": "900",
    }
    for name in ("worker", "worker_high", "api", "sweeper"):
        assert not [k for k in env_of(name) if k.startswith("JOBSCHED_BACKPRESSURE_")], name
