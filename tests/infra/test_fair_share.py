"""The fair share in the stack (decision 0057), on by default at 0.8: the high, default and low
mappings' MaximumConcurrency is raised to ceil(max_concurrency / fair_share), the workers and the
capacity function are told the slots one tenant may hold (``JOBSCHED_TENANT_SLOTS``) and the share
(``JOBSCHED_FAIR_SHARE``: the slots follow the capacity function's ceilings), and ``fair_share=1``
leaves the stack as it was before the share. Synthesized with inline
code (no bundling), without cdk-nag, as the other variants."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from infra.config import StackConfig
from infra.stack import JobschedStack
from jobsched.bench.environment import DEFAULT_TENANT_SLOTS, _function_environment
from jobsched.runtime.resources import ENV_FAIR_SHARE, ENV_TENANT_SLOTS
from jobsched.runtime.settings import tenant_slots_from


def _synth(config: StackConfig) -> tuple[JobschedStack, dict]:
    stack = JobschedStack(
        cdk.App(), "Variant", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass")
    )
    return stack, cdk.assertions.Template.from_stack(stack).to_json()


def _ceilings(stack: JobschedStack, template: dict) -> dict[str, int]:
    """Each queue's mapping's MaximumConcurrency, by the queue the mapping reads."""
    arns = {
        kind: stack.resolve(stack.queues.queue(kind).queue_arn) for kind in ("high", "default", "low", "long")
    }
    found = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Lambda::EventSourceMapping":
            continue
        props = resource["Properties"]
        for kind, arn in arns.items():
            if props["EventSourceArn"] == arn:
                found[kind] = props["ScalingConfig"]["MaximumConcurrency"]
    return found


def _env(stack: JobschedStack, template: dict, name: str) -> dict:
    logical_id = stack.resolve(stack.functions[name].node.default_child.logical_id)
    return template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]


@pytest.fixture(scope="module")
def shared() -> tuple[JobschedStack, dict]:
    return _synth(StackConfig(fair_share=0.5))


def test_the_mappings_get_head_room_and_the_workers_the_slots_one_tenant_may_hold(shared):
    # Given fair_share=0.5 and the default max_concurrency (high 20, default 20, low 5, long 5)
    stack, template = shared
    # Then high, default and low's mappings may start twice as many invocations; long is unchanged
    assert _ceilings(stack, template) == {"high": 40, "default": 40, "low": 10, "long": 5}
    # And both worker functions are told one tenant holds at most max_concurrency of them
    for name in ("worker", "worker_high"):
        assert tenant_slots_from(_env(stack, template, name)[ENV_TENANT_SLOTS]) == {
            "high": 20,
            "default": 20,
            "low": 5,
        }
    # And the share, by which their slots follow the capacity function's ceilings
    assert {_env(stack, template, name)[ENV_FAIR_SHARE] for name in ("worker", "worker_high")} == {"0.5"}
    # And the capacity function, which writes the shared pools' ceilings for them, is told both
    capacity = _capacity_env(stack, template)
    assert (capacity[ENV_FAIR_SHARE], tenant_slots_from(capacity[ENV_TENANT_SLOTS])["default"]) == ("0.5", 20)
    # And the high worker reserves its mapping's whole ceiling (a reservation below it would throttle)
    high = template["Resources"][stack.resolve(stack.functions["worker_high"].node.default_child.logical_id)]
    assert high["Properties"]["ReservedConcurrentExecutions"] == 40


def _capacity_env(stack: JobschedStack, template: dict) -> dict:
    logical_id = stack.resolve(stack.capacity.function.node.default_child.logical_id)
    return template["Resources"][logical_id]["Properties"]["Environment"]["Variables"]


def test_the_share_is_on_by_default_at_0_8():
    # Given the default config (decision 0057, "Why on by default")
    assert StackConfig().fair_share == 0.8
    stack, template = _synth(StackConfig())
    # Then high, default and low's mappings have ceil(20 / 0.8) = 25, ceil(5 / 0.8) = 7; long its 5
    assert _ceilings(stack, template) == {"high": 25, "default": 25, "low": 7, "long": 5}
    # And the workers are told a tenant's base slots and the share they follow the ceilings by
    worker = _env(stack, template, "worker")
    assert tenant_slots_from(worker[ENV_TENANT_SLOTS]) == {"high": 20, "default": 20, "low": 5}
    assert worker[ENV_FAIR_SHARE] == "0.8"


def test_a_fair_share_of_one_leaves_the_stack_as_it_was():
    # Given fair_share=1 (off: -c fair_share=1)
    stack, template = _synth(StackConfig.from_context({"fair_share": "1"}.get))
    # Then every mapping's ceiling is its max_concurrency, and no function is told a tenant's slots or
    # the share (the capacity function writes no ceiling item, the worker reads none)
    assert _ceilings(stack, template) == {"high": 20, "default": 20, "low": 5, "long": 5}
    for env in (_env(stack, template, "worker"), _capacity_env(stack, template)):
        assert ENV_TENANT_SLOTS not in env and ENV_FAIR_SHARE not in env


def test_the_share_is_read_from_the_cdk_context():
    # Given -c fair_share=0.75 / Then the config carries it and the ceilings follow: ceil(20 / 0.75) = 27
    config = StackConfig.from_context({"fair_share": "0.75"}.get)
    assert config.fair_share == 0.75
    assert (config.mapping_ceiling("default"), config.mapping_ceiling("low")) == (27, 7)
    assert config.tenant_slots() == {"high": 20, "default": 20, "low": 5}


def test_the_cost_benchmark_runs_the_worker_with_the_deployments_default_share():
    # Given the default StackConfig / Then the cost benchmark's worker is told the same tenant slots
    # and the same share
    assert StackConfig().tenant_slots() == DEFAULT_TENANT_SLOTS
    env = _function_environment(4)
    assert tenant_slots_from(env[ENV_TENANT_SLOTS]) == DEFAULT_TENANT_SLOTS
    assert float(env[ENV_FAIR_SHARE]) == StackConfig().fair_share
