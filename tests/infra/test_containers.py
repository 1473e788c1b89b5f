"""The container pool (infra/containers.py): the Fargate service on the container queue, its task
definition for arm64, the image (the repository's Dockerfile, or a prebuilt one), its scaling on the
queue's metrics, its network, and least privilege for its two roles. The default synthesis (``synth``:
cdk-nag, cfn-lint and checkov check it in their own modules) and variants with inline code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from infra.bundling import (
    DEV_ONLY,
    LAMBDA_PYTHON_VERSION,
    OPTIONAL_PACKAGES,
    PACKAGES,
    PROJECT_ROOT,
    REQUIREMENTS,
)
from infra.config import ConfigError, StackConfig
from infra.containers import (
    COMMAND,
    IDLE_MINUTES,
    IMAGE_DEV_ONLY,
    SCALE_OUT_AGE_SECONDS,
    STOP_TIMEOUT_SECONDS,
)
from infra.stack import JobschedStack
from jobsched.runtime.resources import CONTAINER_KIND, QUEUES, TABLES


def _one(synth_or_template: Any, type_name: str) -> dict:
    template = getattr(synth_or_template, "template", synth_or_template)
    (resource,) = [r for r in template["Resources"].values() if r["Type"] == type_name]
    return resource["Properties"]


def _container(template: dict) -> dict:
    (container,) = _one(template, "AWS::ECS::TaskDefinition")["ContainerDefinitions"]
    return container


def _policy_statements(template: dict, role_logical_id: str) -> list[dict]:
    statements: list[dict] = []
    for resource in template["Resources"].values():
        if (
            resource["Type"] == "AWS::IAM::Policy"
            and {"Ref": role_logical_id} in resource["Properties"]["Roles"]
        ):
            statements += resource["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _actions(statements: list[dict]) -> set[str]:
    found: set[str] = set()
    for statement in statements:
        value = statement["Action"]
        found |= {value} if isinstance(value, str) else set(value)
    return found


def _synth(**settings: Any) -> tuple[JobschedStack, dict]:
    app = cdk.App(context={k: v if isinstance(v, str) else json.dumps(v) for k, v in settings.items()})
    config = StackConfig.from_context(app.node.try_get_context)
    stack = JobschedStack(
        app, "Variant", config=config, code=lambda_.Code.from_inline("def handler(e, c): pass")
    )
    return stack, cdk.assertions.Template.from_stack(stack).to_json()


# --- the default synthesis ------------------------------------------------------------------------


def test_the_task_definition_is_fargate_arm64_of_the_configured_size(synth):
    # Given the defaults (container_cpu=1024, container_memory=2048) / Then one Fargate task definition
    # for Linux on arm64 (Graviton) of that size, in awsvpc mode
    props = _one(synth, "AWS::ECS::TaskDefinition")
    assert props["RuntimePlatform"] == {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"}
    assert props["RequiresCompatibilities"] == ["FARGATE"]
    assert (props["Cpu"], props["Memory"], props["NetworkMode"]) == ("1024", "2048", "awsvpc")


def test_the_container_runs_the_worker_loop_with_the_worker_functions_environment(synth):
    # Given the worker function's environment / Then the container runs `jobsched worker --pool
    # container` with exactly the variables the worker has (names, settings, code version; the
    # worker's service name, so its run metrics and the alarms on them count the container's runs),
    # and the task's size, by which it counts its runs' Fargate time (usage)
    container = _container(synth.template)
    assert container["Command"] == list(COMMAND) == ["jobsched", "worker", "--pool", "container"]
    env = {item["Name"]: item["Value"] for item in container["Environment"]}
    worker = synth.template["Resources"][synth.logical_id(synth.stack.functions["worker"])]["Properties"]
    size = {name: env.pop(name) for name in ("JOBSCHED_CONTAINER_CPU", "JOBSCHED_CONTAINER_MEMORY_MB")}
    assert size == {"JOBSCHED_CONTAINER_CPU": "1024", "JOBSCHED_CONTAINER_MEMORY_MB": "2048"}
    assert env == worker["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == "worker"
    expected = {t.env_var for t in TABLES} | {q.env_var for q in QUEUES} | {q.dlq_env_var for q in QUEUES}
    assert expected <= set(env)


def test_the_container_stops_gracefully_and_logs_into_the_workers_log_group(synth):
    # Given a stopped task gets SIGTERM, then SIGKILL after the stop timeout / Then the timeout is 120 s
    # (Fargate's maximum; Spot's notice is 2 minutes), the root file system is read-only with a writable
    # /tmp, and the logs go to the worker's log group (the run view reads one group whichever pool ran it)
    container = _container(synth.template)
    assert container["StopTimeout"] == STOP_TIMEOUT_SECONDS == 120
    assert container["ReadonlyRootFilesystem"] is True
    assert container["MountPoints"] == [{"ContainerPath": "/tmp", "ReadOnly": False, "SourceVolume": "tmp"}]
    logging = container["LogConfiguration"]
    assert logging["LogDriver"] == "awslogs"
    worker_logs = synth.logical_id(synth.stack.workers.worker.log_group)
    assert logging["Options"]["awslogs-group"] == {"Ref": worker_logs}
    assert logging["Options"]["awslogs-stream-prefix"] == "container"


def test_the_image_is_the_repository_dockerfile_built_for_arm64(synth):
    # Given no container_image / Then the image is an asset of the repository's Dockerfile for
    # linux/arm64, which synthesis stages without a Docker daemon (cdk deploy builds and pushes it)
    manifest = json.loads((synth.outdir / "Jobsched.assets.json").read_text())
    (image,) = manifest["dockerImages"].values()
    assert image["source"]["dockerFile"] == "Dockerfile"
    assert image["source"]["platform"] == "linux/arm64"
    staged = synth.outdir / image["source"]["directory"]
    assert (staged / "Dockerfile").is_file() and (staged / "jobsched" / "compose").is_dir()
    # the staged context holds the runtime code only: no benchmark, rehearsal, test fakes, venv, tests
    for left_out in (*IMAGE_DEV_ONLY, "tests", "infra", "node_modules", ".venv"):
        assert not (staged / Path(*left_out.split("."))).exists(), left_out


def test_the_dockerfile_holds_what_the_lambda_asset_holds_and_the_cli():
    # Given the Lambda asset's packages (infra/bundling.py) / Then .dockerignore lets in exactly the
    # requirements, those packages and the optional handlers package, and leaves out the development-only
    # parts of jobsched that `jobsched worker` does not import; the image's Python is Lambda's
    lines = [
        line.strip()
        for line in (PROJECT_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    assert {line[1:] for line in lines if line.startswith("!")} == {
        REQUIREMENTS,
        *PACKAGES,
        *OPTIONAL_PACKAGES,
    }
    left_out = {line.replace("/", ".") for line in lines[1:] if line.startswith("jobsched/")}
    assert left_out == set(IMAGE_DEV_ONLY) and set(IMAGE_DEV_ONLY) <= set(DEV_ONLY)
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    assert f"python:{LAMBDA_PYTHON_VERSION}-slim" in dockerfile
    assert 'CMD ["jobsched", "worker", "--pool", "container"]' in dockerfile
    assert "\nUSER " in dockerfile  # not root


def test_the_service_starts_at_zero_on_fargate_with_public_ip_and_no_ingress(synth):
    # Given the defaults / Then the service starts with no task, on FARGATE (container_spot=false),
    # in the pool's own VPC's public subnets with a public IP (no NAT gateway), its security group
    # admitting nothing and letting out HTTPS only
    service = _one(synth, "AWS::ECS::Service")
    assert service["DesiredCount"] == 0
    assert service["CapacityProviderStrategy"] == [{"CapacityProvider": "FARGATE", "Weight": 1}]
    assert service["PlatformVersion"] == "LATEST"
    network = service["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "ENABLED"
    assert len(network["Subnets"]) == 2
    group = _one(synth, "AWS::EC2::SecurityGroup")
    assert "SecurityGroupIngress" not in group
    assert [
        (r["IpProtocol"], r["FromPort"], r["ToPort"], r["CidrIp"]) for r in group["SecurityGroupEgress"]
    ] == [("tcp", 443, 443, "0.0.0.0/0")]
    assert synth.resources("AWS::EC2::NatGateway") == {}
    subnets = synth.resources("AWS::EC2::Subnet").values()
    assert len(subnets) == 2 and all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets)


def test_the_cluster_has_container_insights_and_both_fargate_capacity_providers(synth):
    cluster = _one(synth, "AWS::ECS::Cluster")
    assert {"Name": "containerInsights", "Value": "enabled"} in cluster["ClusterSettings"]
    providers = _one(synth, "AWS::ECS::ClusterCapacityProviderAssociations")["CapacityProviders"]
    assert set(providers) == {"FARGATE", "FARGATE_SPOT"}


def _scaling(template: dict) -> tuple[dict, dict[str, dict], list[dict]]:
    target = _one(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    policies = {
        logical_id: r["Properties"]
        for logical_id, r in template["Resources"].items()
        if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"
    }
    alarms = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        and any(
            "ScalingPolicy" in str(action) or "Scaling" in str(action)
            for action in r["Properties"].get("AlarmActions", [])
        )
    ]
    return target, policies, alarms


def _policy_of(alarm: dict, policies: dict[str, dict]) -> tuple[str, dict]:
    (action,) = alarm["AlarmActions"]
    return action["Ref"], policies[action["Ref"]]


def _queue_dimension(synth) -> dict:
    return {"Fn::GetAtt": [synth.logical_id(synth.stack.queues.queue(CONTAINER_KIND)), "QueueName"]}


def test_the_service_scales_from_zero_to_the_ceiling_on_the_container_queues_metrics(synth):
    # Given container_max_tasks=10 / Then the scalable target is the service's desired count, 0 to 10,
    # with three step policies each driven by one alarm on the container queue
    target, policies, alarms = _scaling(synth.template)
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 10)
    assert target["ScalableDimension"] == "ecs:service:DesiredCount"
    assert len(policies) == 3 and len(alarms) == 3
    by_name = {}
    for alarm in alarms:
        logical_id, policy = _policy_of(alarm, policies)
        by_name[next(n for n in ("Depth", "Age", "Idle") if n in logical_id)] = (alarm, policy)
    queue = _queue_dimension(synth)

    # depth: any visible message adds a task (more for a bigger backlog), every minute it stays
    alarm, policy = by_name["Depth"]
    assert (alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
        "ApproximateNumberOfMessagesVisible", "Maximum", 60
    )  # fmt: skip
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": queue}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanOrEqualToThreshold", 1)
    steps = policy["StepScalingPolicyConfiguration"]
    assert steps["AdjustmentType"] == "ChangeInCapacity"
    adjustments = [
        (s.get("MetricIntervalLowerBound"), s["ScalingAdjustment"]) for s in steps["StepAdjustments"]
    ]
    assert adjustments == [(0, 1), (9, 3), (49, 10)]

    # age: while messages are visible, the oldest waiting past the threshold adds one task
    alarm, policy = by_name["Age"]
    expression = {m["Id"]: m for m in alarm["Metrics"]}
    assert (
        next(m for m in alarm["Metrics"] if m.get("ReturnData", True))["Expression"]
        == "IF(visible > 0, age, 0)"
    )
    assert expression["age"]["MetricStat"]["Metric"]["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert expression["visible"]["MetricStat"]["Metric"]["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert alarm["Threshold"] == SCALE_OUT_AGE_SECONDS
    assert policy["StepScalingPolicyConfiguration"]["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}
    ]

    # idle: nothing visible nor in flight for 5 minutes (or no metric at all) sets the count to 0
    alarm, policy = by_name["Idle"]
    expression = {m["Id"]: m for m in alarm["Metrics"]}
    assert (
        next(m for m in alarm["Metrics"] if m.get("ReturnData", True))["Expression"] == "visible + inflight"
    )
    assert (
        expression["inflight"]["MetricStat"]["Metric"]["MetricName"]
        == "ApproximateNumberOfMessagesNotVisible"
    )
    assert all(
        m["MetricStat"]["Metric"]["Dimensions"] == [{"Name": "QueueName", "Value": queue}]
        for m in alarm["Metrics"]
        if "MetricStat" in m
    )
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanOrEqualToThreshold", 0)
    assert alarm["EvaluationPeriods"] == alarm["DatapointsToAlarm"] == IDLE_MINUTES
    assert alarm["TreatMissingData"] == "breaching"
    steps = policy["StepScalingPolicyConfiguration"]
    assert steps["AdjustmentType"] == "ExactCapacity"
    assert steps["StepAdjustments"] == [{"MetricIntervalUpperBound": 0, "ScalingAdjustment": 0}]


def test_the_task_role_may_do_for_runs_what_the_workers_may_and_consume_its_queue(synth):
    # Given the worker loop runs the worker's code / Then its task role allows exactly the long worker's
    # actions (runs, chunk task responses) but X-Ray and log writes (the awslogs driver writes with the
    # execution role), and receives and deletes from the container queue alone
    pool = synth.stack.containers
    task = _policy_statements(synth.template, synth.logical_id(pool.task_role))
    long_worker = _policy_statements(synth.template, synth.logical_id(synth.stack.workers.long_worker.role))
    lambda_only = {a for a in _actions(long_worker) if a.startswith(("xray:", "logs:"))}
    assert _actions(task) == _actions(long_worker) - lambda_only
    container_queue = {"Fn::GetAtt": [synth.logical_id(synth.stack.queues.queue(CONTAINER_KIND)), "Arn"]}
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage"):
        resources = [s["Resource"] for s in task if action in _actions([s])]
        assert resources == [container_queue], action
    for statement in task:
        assert statement["Effect"] == "Allow"
        assert "*" not in (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )


def test_the_execution_role_only_pulls_the_image_and_writes_the_logs(synth):
    role = synth.stack.containers.task_definition.execution_role
    actions = _actions(_policy_statements(synth.template, synth.logical_id(role)))
    assert actions == {
        "ecr:BatchCheckLayerAvailability",
        "ecr:GetDownloadUrlForLayer",
        "ecr:BatchGetImage",
        "ecr:GetAuthorizationToken",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
    }


# --- variants ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_prebuilt_ecr_image_is_pulled_from_its_repository_alone():
    # Given -c container_image=<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>
    uri = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/jobsched:1.4"
    stack, template = _synth(container_image=uri)
    # Then the container runs that image, no image asset is built, and the execution role pulls from
    # that one repository (and the registry token, which has no resource)
    image = _container(template)["Image"]
    assert "team/jobsched:1.4" in json.dumps(image) and "123456789012.dkr.ecr.eu-west-1" in json.dumps(image)
    role = stack.resolve(stack.containers.task_definition.execution_role.node.default_child.logical_id)
    pulls = [s for s in _policy_statements(template, role) if "ecr:BatchGetImage" in _actions([s])]
    assert [s["Resource"] for s in pulls] == [
        {
            "Fn::Join": [
                "",
                ["arn:", {"Ref": "AWS::Partition"}, ":ecr:eu-west-1:123456789012:repository/team/jobsched"],
            ]
        }
    ] or [s["Resource"] for s in pulls] == ["arn:aws:ecr:eu-west-1:123456789012:repository/team/jobsched"]


@pytest.mark.slow
def test_spot_a_size_and_a_ceiling_follow_the_settings():
    _, template = _synth(
        container_spot="true", container_cpu="2048", container_memory="8192", container_max_tasks="3"
    )
    assert _one(template, "AWS::ECS::Service")["CapacityProviderStrategy"] == [
        {"CapacityProvider": "FARGATE_SPOT", "Weight": 1}
    ]
    props = _one(template, "AWS::ECS::TaskDefinition")
    assert (props["Cpu"], props["Memory"]) == ("2048", "8192")
    env = {item["Name"]: item["Value"] for item in props["ContainerDefinitions"][0]["Environment"]}
    assert (env["JOBSCHED_CONTAINER_CPU"], env["JOBSCHED_CONTAINER_MEMORY_MB"]) == ("2048", "8192")
    assert _one(template, "AWS::ApplicationAutoScaling::ScalableTarget")["MaxCapacity"] == 3


@pytest.mark.slow
def test_the_users_vpc_runs_the_tasks_in_its_subnets_without_a_public_ip():
    # Given vpc_id + vpc_subnet_ids (private subnets with their own NAT gateway or endpoints)
    subnets = "subnet-0123456789abcdef0,subnet-0fedcba9876543210"
    _, template = _synth(vpc_id="vpc-0123456789abcdef0", vpc_subnet_ids=subnets)
    # Then the stack creates no network, and the tasks run in those subnets with no public IP
    assert not [
        r
        for r in template["Resources"].values()
        if r["Type"].startswith("AWS::EC2::") and r["Type"] != "AWS::EC2::SecurityGroup"
    ]
    network = _one(template, "AWS::ECS::Service")["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert network["AssignPublicIp"] == "DISABLED"
    assert network["Subnets"] == subnets.split(",")
    assert _one(template, "AWS::EC2::SecurityGroup")["VpcId"] == "vpc-0123456789abcdef0"


@pytest.mark.slow
def test_container_pool_false_leaves_the_pool_out():
    stack, template = _synth(container_pool="false")
    assert stack.containers is None
    assert not [
        r for r in template["Resources"].values() if r["Type"].startswith(("AWS::ECS::", "AWS::EC2::"))
    ]
    # the queue stays (the API may still accept container-pool jobs; they wait in it)
    assert stack.queues.queue(CONTAINER_KIND) is not None


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"container_cpu": "1000"}, r"container_cpu must be one of \[256, 512"),
        ({"container_memory": "1536"}, r"container_memory must be one of 2048\.\.8192 MiB in steps of 1024"),
        (
            {"container_cpu": "256", "container_memory": "4096"},
            r"container_memory must be one of 512\.\.2048",
        ),
        ({"container_max_tasks": "0"}, r"container_max_tasks must be 1 to 1000"),
        ({"container_image": "not an image"}, r"container_image must be an image URI"),
        ({"vpc_id": "vpc-0123456789abcdef0"}, r"vpc_id and vpc_subnet_ids go together"),
        ({"vpc_subnet_ids": "subnet-0123456789abcdef0"}, r"vpc_id and vpc_subnet_ids go together"),
        ({"vpc_id": "my-vpc", "vpc_subnet_ids": "subnet-0123456789abcdef0"}, r"vpc_id must look like vpc-"),
        (
            {"vpc_id": "vpc-0123456789abcdef0", "vpc_subnet_ids": "sub-1"},
            r"vpc_subnet_ids: 'sub-1' must look like",
        ),
        (
            {"long_reserved_concurrency": "3"},
            r"long_reserved_concurrency must be 0 \(no reservation\) or between max_concurrency\[long\]",
        ),
    ],
)
def test_bad_container_settings_are_refused_naming_the_setting(context, message):
    with pytest.raises(ConfigError, match=message):
        StackConfig.from_context(context.get)


def test_the_dockerfile_passes_checkovs_dockerfile_checks():
    # Given the Dockerfile (a non-root user, a HEALTHCHECK instruction, no ADD) / When checkov scans it
    env = {**os.environ, "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE"}
    command = [sys.executable, "-m", "checkov.main", "-f", str(PROJECT_ROOT / "Dockerfile")]
    result = subprocess.run(
        [*command, "--framework", "dockerfile", "--skip-download", "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    # Then no check fails, and it did run checks
    assert report["results"]["failed_checks"] == []
    assert report["summary"]["passed"] > 20


@pytest.mark.slow
def test_a_synth_bound_to_an_account_looks_nothing_up(tmp_path):
    # Given a stack bound to an account and region (as the CDK CLI synthesizes it for a deploy)
    app = cdk.App(outdir=str(tmp_path))
    JobschedStack(
        app,
        "Bound",
        config=StackConfig(),
        code=lambda_.Code.from_inline("def handler(e, c): pass"),
        env=cdk.Environment(account="123456789012", region="eu-west-1"),
    )
    app.synth()
    # Then the VPC's AZs are resolved by CloudFormation (Fn::GetAZs), not looked up at synth: no
    # missing context, so the CLI writes no cdk.context.json into the project
    assert "missing" not in json.loads((tmp_path / "manifest.json").read_text())
    template = json.loads((tmp_path / "Bound.template.json").read_text())
    zones = [
        r["Properties"]["AvailabilityZone"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EC2::Subnet"
    ]
    assert zones == [{"Fn::Select": [i, {"Fn::GetAZs": ""}]} for i in range(2)]
