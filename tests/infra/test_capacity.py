"""infra/capacity.py: the Capacity function, its one-minute schedule, its grants and its settings
(decision 0055, docs/scaling.md "In the CDK stack")."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from infra.capacity import (
    MAPPING_ACTIONS,
    PROVISIONED_ACTIONS,
    SCALABLE_TARGET_ACTIONS,
    SERVICE_VALIDATION_ACTIONS,
    capacity_queues,
)
from infra.config import ConfigError, StackConfig
from infra.dispatch import TICK_MAX_EVENT_AGE_SECONDS, TICK_RETRY_ATTEMPTS
from infra.stack import JobschedStack
from jobsched.local.iam.template import read_roles
from jobsched.runtime.resources import (
    CAPACITY_FUNCTION,
    ENV_CAPACITY_CONTAINER_SERVICE,
    ENV_CAPACITY_MAPPING_PREFIX,
    ENV_CAPACITY_MAX_PROVISIONED,
    ENV_CAPACITY_QUEUES,
    ENV_CAPACITY_WORKER_FUNCTION,
    JOBS_TABLE,
    LAMBDA_QUEUE_KINDS,
    LEASES_TABLE,
    RUNS_TABLE,
    WORKER_ALIAS,
)
from tests.infra.conftest import MAX_PROVISIONED, WARM_TASKS

BASE_ACTIONS = {
    "logs:CreateLogStream",
    "logs:PutLogEvents",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}


def _from(context: dict) -> StackConfig:
    return StackConfig.from_context(context.get)


def _function(synth) -> dict:
    return synth.template["Resources"][synth.logical_id(synth.stack.capacity.function)]["Properties"]


def _statements(synth, role: Any) -> list[dict]:
    role_id = synth.logical_id(role)
    found: list[dict] = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def _grants(synth, role: Any) -> dict[str, list[Any]]:
    """Action -> the resources granted for it (every statement of the role's policies)."""
    grants: dict[str, list[Any]] = {}
    for statement in _statements(synth, role):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        for action in actions:
            grants.setdefault(action, []).extend(resources)
    return grants


def _arn(synth, construct) -> dict:
    return {"Fn::GetAtt": [synth.logical_id(construct), "Arn"]}


def _mapping_ids(synth) -> dict[str, str]:
    """Queue kind -> the logical id of its worker mapping (by the queue it reads)."""
    queues = {synth.logical_id(synth.stack.queues.queue(kind)): kind for kind in LAMBDA_QUEUE_KINDS}
    found = {}
    for logical_id, mapping in synth.resources("AWS::Lambda::EventSourceMapping").items():
        source = mapping["Properties"]["EventSourceArn"].get("Fn::GetAtt", [None])[0]
        if source in queues:
            found[queues[source]] = logical_id
    return found


def test_the_function_runs_the_capacity_entry_point_with_the_policy_and_the_mappings(synth):
    props = _function(synth)
    assert props["Handler"] == CAPACITY_FUNCTION.handler
    assert props["Timeout"] == CAPACITY_FUNCTION.timeout_seconds
    variables = props["Environment"]["Variables"]
    # Given the default settings, Then each queue's base and cap are its mapping's ceiling
    # (max_concurrency with the default fair share's head-room, ceil(20 / 0.8) = 25, ceil(5 / 0.8) = 7 on
    # high, default and low, decision 0057; long has none): nothing raised
    # (and the fixture's capacity_max_warm_tasks=4: the container queue from 0 up to 4 tasks, one run each)
    assert json.loads(variables[ENV_CAPACITY_QUEUES]) == {
        "high": {"base": 25, "cap": 25, "batch_size": 10},
        "default": {"base": 25, "cap": 25, "batch_size": 10},
        "low": {"base": 7, "cap": 7, "batch_size": 10},
        "long": {"base": 5, "cap": 5, "batch_size": 1},
        "container": {"base": 0, "cap": WARM_TASKS, "batch_size": 1},
    }
    # And the container service is named <cluster>/<service>
    containers = synth.stack.containers
    assert variables[ENV_CAPACITY_CONTAINER_SERVICE] == {
        "Fn::Join": [
            "",
            [
                {"Ref": synth.logical_id(containers.cluster)},
                "/",
                {"Fn::GetAtt": [synth.logical_id(containers.service), "Name"]},
            ],
        ]
    }
    # And each mapping variable names (Ref: its UUID) the worker mapping of that queue
    assert {kind: variables[ENV_CAPACITY_MAPPING_PREFIX + kind.upper()] for kind in LAMBDA_QUEUE_KINDS} == {
        kind: {"Ref": logical_id} for kind, logical_id in _mapping_ids(synth).items()
    }


def test_a_one_minute_schedule_invokes_it_with_the_ticks_retry_policy_and_dead_letter_queue(synth):
    schedules = [
        s["Properties"]
        for s in synth.resources("AWS::Scheduler::Schedule").values()
        if s["Properties"]["Target"]["Arn"] == _arn(synth, synth.stack.capacity.function)
    ]
    assert len(schedules) == 1
    (schedule,) = schedules
    assert schedule["ScheduleExpression"] == "rate(1 minute)"
    group = synth.template["Resources"][synth.logical_id(synth.stack.dispatch.group)]["Properties"]["Name"]
    assert schedule["GroupName"] == group  # the dispatcher's group
    target = schedule["Target"]
    assert target["RetryPolicy"] == {
        "MaximumEventAgeInSeconds": TICK_MAX_EVENT_AGE_SECONDS,
        "MaximumRetryAttempts": TICK_RETRY_ATTEMPTS,
    }
    assert target["DeadLetterConfig"] == {"Arn": _arn(synth, synth.stack.dispatch.schedule_dlq)}
    # And the scheduler's role for it may invoke this function alone, and dead-letter
    role_id = target["RoleArn"]["Fn::GetAtt"][0]
    assert role_id == synth.logical_id(synth.stack.capacity.scheduler_role)
    grants = _grants(synth, synth.stack.capacity.scheduler_role)
    assert set(grants) == {"lambda:InvokeFunction", "sqs:SendMessage"}
    function = _arn(synth, synth.stack.capacity.function)
    assert grants["lambda:InvokeFunction"] == [function, {"Fn::Join": ["", [function, ":*"]]}]


def test_its_role_may_make_exactly_the_reads_mapping_calls_and_usage_write_of_a_tick(synth):
    grants = _grants(synth, synth.stack.capacity.function.role)
    jobs, runs, leases = (
        _arn(synth, synth.stack.tables.table(spec)) for spec in (JOBS_TABLE, RUNS_TABLE, LEASES_TABLE)
    )
    # Then, beyond its logs and traces: the due index and the jobs, the ledger, the ages item, and its
    # usage item on the deployment row (decision 0059 amended)
    assert {a: r for a, r in grants.items() if a.startswith("dynamodb:")} == {
        "dynamodb:Query": [{"Fn::Join": ["", [jobs, "/index/due_index"]]}, runs],
        "dynamodb:BatchGetItem": [jobs],
        "dynamodb:GetItem": [leases],
        "dynamodb:UpdateItem": [leases],
    }
    # And the two mapping calls on the four worker mappings, nothing else of Lambda
    mappings = sorted(
        json.dumps(
            {
                "Fn::Join": [
                    "",
                    [
                        "arn:",
                        {"Ref": "AWS::Partition"},
                        ":lambda:",
                        {"Ref": "AWS::Region"},
                        ":",
                        {"Ref": "AWS::AccountId"},
                        ":event-source-mapping:",
                        {"Ref": logical_id},
                    ],
                ]
            }
        )
        for logical_id in _mapping_ids(synth).values()
    )
    assert len(mappings) == len(LAMBDA_QUEUE_KINDS)
    assert {a for a in grants if a.startswith("lambda:")} == set(MAPPING_ACTIONS)
    for action in MAPPING_ACTIONS:
        assert sorted(json.dumps(r) for r in grants[action]) == mappings
    # And, with warm container tasks, the scalable target's two calls (no resource-level permission)
    # and what Application Auto Scaling validates on the one container service
    for action in SCALABLE_TARGET_ACTIONS:
        assert grants[action] == ["*"]
    service = {"Ref": synth.logical_id(synth.stack.containers.service)}
    for action in SERVICE_VALIDATION_ACTIONS:
        assert grants[action] == [service]
    assert set(grants) - BASE_ACTIONS - {
        "dynamodb:Query",
        "dynamodb:BatchGetItem",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
    } == set(MAPPING_ACTIONS) | set(SCALABLE_TARGET_ACTIONS) | set(SERVICE_VALIDATION_ACTIONS)


def test_the_caps_are_parsed_and_written_into_the_policy():
    config = _from(
        {
            "capacity_max_concurrency": '{"default": 200, "low": 50, "high": 40}',
            "high_reserved_concurrency": "40",
        }
    )
    assert config.capacity_caps() == {"high": 40, "default": 200, "low": 50, "long": 5}
    # (each base the mapping's ceiling with the default fair share's head-room: 25, 25, 7)
    assert capacity_queues(config) == {
        "high": {"base": 25, "cap": 40, "batch_size": 10},
        "default": {"base": 25, "cap": 200, "batch_size": 10},
        "low": {"base": 7, "cap": 50, "batch_size": 10},
        "long": {"base": 5, "cap": 5, "batch_size": 1},
    }
    assert _from({}).capacity is True and _from({"capacity": "false"}).capacity is False


@pytest.mark.parametrize(
    ("context", "named"),
    [
        (
            {"capacity_max_concurrency": '{"default": 10}'},
            r"capacity_max_concurrency\[default\] must be between the default mapping's "
            r"MaximumConcurrency \(25: max_concurrency\[default\] with the fair share's head-room\) "
            r"and 1000, got 10",
        ),
        (
            {"capacity_max_concurrency": '{"low": 1001}'},
            r"capacity_max_concurrency\[low\] must be between .* got 1001",
        ),
        (
            {"capacity_max_concurrency": '{"container": 4}'},
            r"capacity_max_concurrency takes the queues .* got \['container'\]",
        ),
        (
            {"capacity_max_concurrency": '{"high": 40}'},
            r"capacity_max_concurrency\[high\] \(40\) is above the high worker's reserved concurrency \(25\)",
        ),
        (
            {"capacity_max_concurrency": '{"long": 9}'},
            r"capacity_max_concurrency\[long\] \(9\) is above the long worker's reserved concurrency \(5\)",
        ),
        (
            {"capacity_max_concurrency": "not json"},
            r"capacity_max_concurrency='not json' is not a valid dict",
        ),
        (
            {"capacity_max_warm_tasks": "11"},
            r"capacity_max_warm_tasks must be 0 \(never raised\) to container_max_tasks \(10\), got 11",
        ),
        (
            {"capacity_max_warm_tasks": "-1"},
            r"capacity_max_warm_tasks must be 0 .* got -1",
        ),
        (
            {"capacity_max_warm_tasks": "2", "container_pool": "false"},
            r"capacity_max_warm_tasks needs container_pool=true and capacity=true",
        ),
        (
            {"capacity_max_warm_tasks": "2", "capacity": "false"},
            r"capacity_max_warm_tasks needs container_pool=true and capacity=true",
        ),
        (
            {"capacity_max_provisioned": "33"},
            r"capacity_max_provisioned must be 0 \(never provisioned\) to 32, the default and low "
            r"queues' caps together .* got 33",
        ),
        (
            {"capacity_max_provisioned": "-1"},
            r"capacity_max_provisioned must be 0 .* got -1",
        ),
        (
            {"capacity_max_provisioned": "5", "capacity": "false"},
            r"capacity_max_provisioned needs capacity=true",
        ),
        (
            {"capacity_max_warm_tasks": "many"},
            r"capacity_max_warm_tasks='many' is not a valid int",
        ),
    ],
)
def test_a_bad_cap_stops_the_synth_naming_the_setting(context, named):
    with pytest.raises(ConfigError, match=named):
        _from(context)


def test_without_a_reservation_high_may_be_raised_to_1000():
    config = _from({"capacity_max_concurrency": '{"high": 1000}', "high_reserved_concurrency": "0"})
    assert config.capacity_caps()["high"] == 1000


def test_capacity_false_leaves_the_function_and_its_schedule_out(tmp_path):
    app = cdk.App(outdir=str(tmp_path), context={"capacity": "false"})
    config = StackConfig.from_context(app.node.try_get_context)
    stack = JobschedStack(
        app, "Jobsched", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass")
    )
    template = app.synth().get_stack_by_name("Jobsched").template
    assert stack.capacity is None
    handlers = {
        r["Properties"].get("Handler")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
    }
    assert CAPACITY_FUNCTION.handler not in handlers
    # And the schedules left are the dispatcher's ticks and the sweep
    schedules = [r for r in template["Resources"].values() if r["Type"] == "AWS::Scheduler::Schedule"]
    assert len(schedules) == config.shards + 1


def test_without_warm_tasks_the_function_has_no_container_policy_nor_its_grants(tmp_path):
    # Given the default capacity_max_warm_tasks (0)
    app = cdk.App(outdir=str(tmp_path))
    config = StackConfig.from_context(app.node.try_get_context)
    stack = JobschedStack(
        app, "Jobsched", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass")
    )
    template = app.synth().get_stack_by_name("Jobsched").template
    function_id = stack.resolve(stack.capacity.function.node.default_child.logical_id)
    variables = template["Resources"][function_id]["Properties"]["Environment"]["Variables"]
    # Then the policy has the four Lambda queues only and no container service is named
    assert set(json.loads(variables[ENV_CAPACITY_QUEUES])) == set(LAMBDA_QUEUE_KINDS)
    assert ENV_CAPACITY_CONTAINER_SERVICE not in variables
    # And its role holds no Application Auto Scaling nor ECS action
    role_id = stack.resolve(stack.capacity.function.role.node.default_child.logical_id)
    actions = set()
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"]["Roles"]:
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                found = statement["Action"]
                actions |= set(found if isinstance(found, list) else [found])
    assert set(MAPPING_ACTIONS) <= actions
    assert not {a for a in actions if a.startswith(("application-autoscaling:", "ecs:"))}


def test_the_provisioned_cap_follows_the_default_and_low_caps():
    # Given default and low raised to 200 and 50, Then up to 250 instances may be provisioned
    config = _from(
        {"capacity_max_concurrency": '{"default": 200, "low": 50}', "capacity_max_provisioned": "250"}
    )
    assert config.capacity_max_provisioned == 250
    assert _from({}).capacity_max_provisioned == 0


def _mapping_targets(synth) -> dict[str, dict]:
    """Queue kind -> the FunctionName its worker mapping invokes."""
    ids = _mapping_ids(synth)
    return {kind: synth.template["Resources"][ids[kind]]["Properties"]["FunctionName"] for kind in ids}


def test_by_default_no_worker_version_nor_alias_and_every_mapping_invokes_its_function(synth):
    # Given capacity_max_provisioned unset (the default synth)
    assert synth.stack.workers.worker_alias is None
    assert synth.resources("AWS::Lambda::Alias") == {} and synth.resources("AWS::Lambda::Version") == {}
    functions = synth.stack.workers.consumers
    assert _mapping_targets(synth) == {k: {"Ref": synth.logical_id(functions[k])} for k in LAMBDA_QUEUE_KINDS}
    # Then the capacity function has no alias to provision, nor a grant for it
    variables = _function(synth)["Environment"]["Variables"]
    assert ENV_CAPACITY_WORKER_FUNCTION not in variables and ENV_CAPACITY_MAX_PROVISIONED not in variables
    assert not set(PROVISIONED_ACTIONS) & set(_grants(synth, synth.stack.capacity.function.role))


def test_with_a_provisioned_cap_default_and_low_invoke_the_workers_alias_of_its_current_version(cmk_synth):
    synth = cmk_synth
    worker = synth.logical_id(synth.stack.workers.worker)
    # Given capacity_max_provisioned=25, Then one version of the worker is published, deleted when replaced
    ((version_id, version),) = synth.resources("AWS::Lambda::Version").items()
    assert version["Properties"]["FunctionName"] == {"Ref": worker}
    assert version["DeletionPolicy"] == "Delete"
    # And the alias live points at it, with no provisioned concurrency of its own (the function sets it)
    ((alias_id, alias),) = synth.resources("AWS::Lambda::Alias").items()
    assert alias["Properties"]["Name"] == WORKER_ALIAS
    assert alias["Properties"]["FunctionName"] == {"Ref": worker}
    assert alias["Properties"]["FunctionVersion"] == {"Fn::GetAtt": [version_id, "Version"]}
    assert "ProvisionedConcurrencyConfig" not in alias["Properties"]
    # And default and low invoke the alias; high and long their own functions, unchanged
    # (CDK names an alias "<function name>:live", the name selected from the alias's ARN)
    workers = synth.stack.workers
    by_alias = {
        "Fn::Join": [
            "",
            [{"Fn::Select": [6, {"Fn::Split": [":", {"Ref": alias_id}]}]}, f":{WORKER_ALIAS}"],
        ]
    }
    assert _mapping_targets(synth) == {
        "default": by_alias,
        "low": by_alias,
        "high": {"Ref": synth.logical_id(workers.high_worker)},
        "long": {"Ref": synth.logical_id(workers.long_worker)},
    }
    # And the permissions check reads them as the worker's mappings (its consume grants are platform's)
    consumed = [function for function, _ in read_roles(synth.template).consumed]
    assert (consumed.count("worker"), consumed.count("worker_high"), consumed.count("worker_long")) == (
        2,
        1,
        1,
    )


def test_with_a_provisioned_cap_the_function_may_provision_exactly_the_alias(cmk_synth):
    synth = cmk_synth
    variables = _function(synth)["Environment"]["Variables"]
    worker = synth.logical_id(synth.stack.workers.worker)
    # Then it is told the worker and its cap
    assert variables[ENV_CAPACITY_WORKER_FUNCTION] == {"Ref": worker}
    assert variables[ENV_CAPACITY_MAX_PROVISIONED] == str(MAX_PROVISIONED)
    # And may get, put and delete the provisioned concurrency of the alias live alone
    grants = _grants(synth, synth.stack.capacity.function.role)
    alias_arn = {"Fn::Join": ["", [{"Fn::GetAtt": [worker, "Arn"]}, f":{WORKER_ALIAS}"]]}
    for action in PROVISIONED_ACTIONS:
        assert grants[action] == [alias_arn]
    assert {a for a in grants if a.startswith("lambda:")} == set(MAPPING_ACTIONS) | set(PROVISIONED_ACTIONS)
