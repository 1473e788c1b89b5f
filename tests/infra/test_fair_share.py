"""The fair share in the stack (decision 0057): the high, default and low mappings' MaximumConcurrency
is raised to ceil(max_concurrency / fair_share), the workers are told the slots one tenant may hold
(``JOBSCHED_TENANT_SLOTS``), and ``fair_share=1`` leaves the stack as it was. Synthesized with inline
code (no bundling), without cdk-nag, as the other variants."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from infra.config import StackConfig
from infra.stack import JobschedStack
from jobsched.bench.environment import DEFAULT_TENANT_SLOTS
from jobsched.runtime.resources import ENV_TENANT_SLOTS
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
    # And the high worker reserves its mapping's whole ceiling (a reservation below it would throttle)
    high = template["Resources"][stack.resolve(stack.functions["worker_high"].node.default_child.logical_id)]
    assert high["Properties"]["ReservedConcurrentExecutions"] == 40


def test_a_fair_share_of_one_leaves_the_stack_as_it_was():
    # Given fair_share=1 (off), the default (decision 0057, "Why off by default")
    assert StackConfig().fair_share == 1.0
    stack, template = _synth(StackConfig(fair_share=1.0))
    # Then every mapping's ceiling is its max_concurrency, and no worker is told a tenant's slots
    assert _ceilings(stack, template) == {"high": 20, "default": 20, "low": 5, "long": 5}
    assert ENV_TENANT_SLOTS not in _env(stack, template, "worker")


def test_the_share_is_read_from_the_cdk_context():
    # Given -c fair_share=0.75 / Then the config carries it and the ceilings follow: ceil(20 / 0.75) = 27
    config = StackConfig.from_context({"fair_share": "0.75"}.get)
    assert config.fair_share == 0.75
    assert (config.mapping_ceiling("default"), config.mapping_ceiling("low")) == (27, 7)
    assert config.tenant_slots() == {"high": 20, "default": 20, "low": 5}


def test_the_cost_benchmark_runs_the_worker_with_the_deployments_default_share():
    # Given the default StackConfig / Then the cost benchmark's worker is told the same tenant slots
    assert StackConfig().tenant_slots() == DEFAULT_TENANT_SLOTS
