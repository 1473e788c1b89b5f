"""The high queue's reserved capacity and the backpressure settings, as deployment variants.
Synthesized with inline code (no bundling), without cdk-nag: only the workers and the dispatcher
differ from the main synthesis (which cdk-nag, cfn-lint and checkov check)."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from infra.config import StackConfig
from infra.stack import JobschedStack
from jobsched.runtime.resources import ENV_BACKPRESSURE_AGE_PREFIX, ENV_BACKPRESSURE_DEPTH_PREFIX


def _synth(config: StackConfig) -> tuple[JobschedStack, dict]:
    stack = JobschedStack(
        cdk.App(), "Variant", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass")
    )
    return stack, cdk.assertions.Template.from_stack(stack).to_json()


def _function(stack: JobschedStack, template: dict, name: str) -> dict:
    logical_id = stack.resolve(stack.functions[name].node.default_child.logical_id)
    return template["Resources"][logical_id]


def _checkov_skips(resource: dict) -> set[str]:
    return {skip["id"] for skip in resource.get("Metadata", {}).get("checkov", {}).get("skip", [])}


@pytest.fixture(scope="module")
def larger() -> tuple[JobschedStack, dict]:
    return _synth(
        StackConfig(
            max_concurrency={"high": 50, "default": 30, "low": 10, "long": 5},
            high_reserved_concurrency=80,
            backpressure_depth={"default": 5000, "low": 200},
            backpressure_age_seconds={"default": 1800, "low": 0},
            fair_share=0.8,
        )
    )


def test_the_reservation_follows_the_setting_and_the_high_ceiling_its_own(larger):
    # Given high_reserved_concurrency=80, max_concurrency[high]=50 and fair_share=0.8
    stack, template = larger
    high = _function(stack, template, "worker_high")
    # Then the high worker reserves 80 executions, and its one mapping starts at most 63: 50 one tenant
    # may hold, with the fair share's head-room (ceil(50 / 0.8), decision 0057)
    assert high["Properties"]["ReservedConcurrentExecutions"] == 80
    mappings = [
        m["Properties"]
        for m in template["Resources"].values()
        if m["Type"] == "AWS::Lambda::EventSourceMapping"
        and m["Properties"]["FunctionName"]
        == {"Ref": stack.resolve(stack.functions["worker_high"].node.default_child.logical_id)}
    ]
    assert [m["ScalingConfig"] for m in mappings] == [{"MaximumConcurrency": 63}]
    # And checkov's reserved-concurrency check is not skipped on it (it passes), only on the others
    assert "CKV_AWS_115" not in _checkov_skips(high)
    assert "CKV_AWS_115" in _checkov_skips(_function(stack, template, "worker"))


def test_the_dispatcher_gets_each_priorities_backpressure(larger):
    # Given per-priority depth and age limits / Then the dispatcher's environment carries them
    stack, template = larger
    env = _function(stack, template, "dispatcher")["Properties"]["Environment"]["Variables"]
    assert env[ENV_BACKPRESSURE_DEPTH_PREFIX + "DEFAULT"] == "5000"
    assert env[ENV_BACKPRESSURE_DEPTH_PREFIX + "LOW"] == "200"
    assert env[ENV_BACKPRESSURE_AGE_PREFIX + "DEFAULT"] == "1800"
    assert env[ENV_BACKPRESSURE_AGE_PREFIX + "LOW"] == "0"


def test_no_reservation_keeps_the_high_function_without_one_and_says_why():
    # Given high_reserved_concurrency=0 (an account whose quota cannot spare a reservation)
    stack, template = _synth(StackConfig(high_reserved_concurrency=0))
    high = _function(stack, template, "worker_high")
    # Then the high worker still has its own function and mapping, but no reservation, and checkov's
    # reserved-concurrency check is skipped on it with the reason
    assert "ReservedConcurrentExecutions" not in high["Properties"]
    assert "CKV_AWS_115" in _checkov_skips(high)
