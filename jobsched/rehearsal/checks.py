"""What the code relies on, read back from the deployed account's APIs (never from the template).

:func:`read_deployment` finds the stack's functions and reads each one's configuration from Lambda;
their environment variables name every resource the code uses. :func:`check_deployment` then asks
DynamoDB, SQS, Lambda, Step Functions, S3 and SNS about each of those resources and compares what they
answer with what the code expects: the table specs of :mod:`jobsched.runtime.resources`, the redrive
and visibility rules of the queues, the event source mappings' batch size, partial batch responses
and ``MaximumConcurrency``, a state machine definition with its substitutions resolved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobsched.long_jobs.asl import LONG_QUEUE, QUEUE_URL_PATH
from jobsched.runtime import resources

#: AWS's rule for a queue feeding a Lambda function: visibility timeout at least 6x its timeout.
VISIBILITY_FACTOR = 6
#: The stack outputs docs/deploy.md ("Outputs") promises for the default settings.
OUTPUTS = ("ApiUrl", "ConsoleUrl", "DashboardUrl", "AlertTopicArn", "PayloadBucket", "StateMachineArn")
#: Records per invocation the long queue's mapping may hand over: a chunk runs for minutes.
LONG_BATCH_SIZE = 1


@dataclass(frozen=True)
class Result:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class Report:
    """The results of every check, in order."""

    results: list[Result] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.results.append(Result(name, bool(ok), detail))
        return bool(ok)

    def equal(self, name: str, actual: Any, expected: Any) -> bool:
        return self.check(name, actual == expected, f"expected {expected!r}, found {actual!r}")

    @property
    def passed(self) -> int:
        return sum(result.ok for result in self.results)

    @property
    def failures(self) -> list[Result]:
        return [result for result in self.results if not result.ok]


@dataclass(frozen=True)
class Deployment:
    """The deployed functions (logical id -> Lambda's configuration) and the stack's outputs."""

    functions: dict[str, dict[str, Any]]
    outputs: dict[str, str]

    def environment(self) -> dict[str, str]:
        """Every function's variables together (they agree on every resource name; the function
        that sets a variable alone, e.g. the dispatcher's backpressure limits, contributes it)."""
        merged: dict[str, str] = {}
        for config in self.functions.values():
            merged.update(config.get("Environment", {}).get("Variables", {}))
        return merged

    def disagreements(self) -> dict[str, set[str]]:
        """Variables two functions set differently (only ``POWERTOOLS_SERVICE_NAME`` may)."""
        seen: dict[str, set[str]] = {}
        for config in self.functions.values():
            for key, value in config.get("Environment", {}).get("Variables", {}).items():
                seen.setdefault(key, set()).add(value)
        return {key: values for key, values in seen.items() if len(values) > 1}


def read_deployment(cloudformation: Any, lambda_: Any, stack_name: str) -> Deployment:
    """The stack's functions as Lambda describes them, and its outputs."""
    stack = cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    functions: dict[str, dict[str, Any]] = {}
    for item in cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]:
        if item.get("ResourceType") == "AWS::Lambda::Function":
            name = item["PhysicalResourceId"]
            functions[item["LogicalResourceId"]] = lambda_.get_function_configuration(FunctionName=name)
    return Deployment(functions, outputs)


def check_tables(report: Report, dynamodb: Any, env: Mapping[str, str]) -> None:
    for spec in resources.TABLES:
        label = f"table {spec.logical_name}"
        name = env.get(spec.env_var, "")
        if not report.check(f"{label}: named by {spec.env_var}", bool(name)):
            continue
        table = dynamodb.describe_table(TableName=name)["Table"]
        expected = spec.create_table_kwargs(name)
        report.equal(f"{label}: key schema", table["KeySchema"], expected["KeySchema"])
        report.equal(
            f"{label}: attribute types",
            sorted((a["AttributeName"], a["AttributeType"]) for a in table["AttributeDefinitions"]),
            sorted((a["AttributeName"], a["AttributeType"]) for a in expected["AttributeDefinitions"]),
        )
        report.equal(
            f"{label}: indexes",
            _indexes(table.get("GlobalSecondaryIndexes", [])),
            _indexes(expected.get("GlobalSecondaryIndexes", [])),
        )
        ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        found = ttl.get("AttributeName") if ttl.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") else None
        report.equal(f"{label}: TTL attribute", found, spec.ttl_attribute)


def _indexes(indexes: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            index["IndexName"],
            json.dumps(index["KeySchema"]),
            index["Projection"]["ProjectionType"],
            tuple(sorted(index["Projection"].get("NonKeyAttributes", []))),
        )
        for index in indexes
    )


def _queue_attributes(sqs: Any, url: str) -> dict[str, str]:
    return dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])


def check_queues(
    report: Report,
    sqs: Any,
    lambda_: Any,
    env: Mapping[str, str],
    functions: Mapping[str, Mapping[str, Any]],
    max_concurrency: Mapping[str, int],
) -> None:
    """Each queue and DLQ the variables name: redrive, visibility >= 6x its consumer's timeout, and its
    event source mapping (batch size, ReportBatchItemFailures, MaximumConcurrency)."""
    timeouts = {config["FunctionArn"]: config["Timeout"] for config in functions.values()}
    mappings: dict[str, list[dict[str, Any]]] = {}
    for mapping in _all_mappings(lambda_):
        mappings.setdefault(mapping["EventSourceArn"], []).append(mapping)
    worker_batch = int(env.get(resources.ENV_WORKER_CONCURRENCY, resources.DEFAULT_WORKER_CONCURRENCY))
    for spec in resources.QUEUES:
        label = f"queue {spec.kind}"
        url, dlq_url = env.get(spec.env_var, ""), env.get(spec.dlq_env_var, "")
        if not report.check(
            f"{label}: named by {spec.env_var} and {spec.dlq_env_var}", bool(url and dlq_url)
        ):
            continue
        queue, dlq = _queue_attributes(sqs, url), _queue_attributes(sqs, dlq_url)
        redrive = json.loads(queue.get("RedrivePolicy") or "{}")
        report.equal(
            f"{label}: redrive to its DLQ after {spec.max_receive_count} receives",
            (redrive.get("deadLetterTargetArn"), int(redrive.get("maxReceiveCount", 0))),
            (dlq["QueueArn"], spec.max_receive_count),
        )
        batch = LONG_BATCH_SIZE if spec.kind == "long" else worker_batch
        if spec.kind in resources.LAMBDA_QUEUE_KINDS:
            _check_consumer(report, label, queue, mappings, timeouts, batch, max_concurrency.get(spec.kind))
        _check_consumer(report, f"{label} DLQ", dlq, mappings, timeouts, worker_batch, None)


def _check_consumer(
    report: Report,
    label: str,
    queue: Mapping[str, str],
    mappings: Mapping[str, list[dict[str, Any]]],
    timeouts: Mapping[str, int],
    max_batch: int,
    max_concurrency: int | None,
) -> None:
    found = mappings.get(queue["QueueArn"], [])
    if not report.check(f"{label}: one event source mapping", len(found) == 1, f"found {len(found)}"):
        return
    mapping = found[0]
    timeout = timeouts.get(mapping["FunctionArn"], 0)
    visibility = int(queue["VisibilityTimeout"])
    report.check(
        f"{label}: visibility timeout >= {VISIBILITY_FACTOR}x its consumer's timeout",
        timeout > 0 and visibility >= VISIBILITY_FACTOR * timeout,
        f"visibility {visibility} s, consumer timeout {timeout} s",
    )
    report.check(
        f"{label}: mapping batch size <= {max_batch}",
        0 < mapping["BatchSize"] <= max_batch,
        f"found {mapping['BatchSize']}",
    )
    report.check(
        f"{label}: mapping reports batch item failures",
        "ReportBatchItemFailures" in (mapping.get("FunctionResponseTypes") or []),
        f"found {mapping.get('FunctionResponseTypes')}",
    )
    concurrency = (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency")
    if max_concurrency is None:
        report.check(f"{label}: mapping has a MaximumConcurrency", bool(concurrency), f"found {concurrency}")
    else:
        report.equal(f"{label}: mapping MaximumConcurrency", concurrency, max_concurrency)


def check_capacity(
    report: Report, sqs: Any, lambda_: Any, env: Mapping[str, str], outputs: Mapping[str, str] | None = None
) -> None:
    """The capacity function's variables (infra/capacity.py), when it is deployed: each Lambda queue's
    mapping UUID names the mapping that reads that queue, and its policy's base is that mapping's
    ``MaximumConcurrency``; with warm container tasks (``capacity_max_warm_tasks``), the service it
    names is the container pool's (the stack's outputs) and the container queue's base is 0."""
    if resources.ENV_CAPACITY_QUEUES not in env:
        return
    try:
        policy = json.loads(env[resources.ENV_CAPACITY_QUEUES])
    except ValueError:
        policy = None
    if not report.check(
        f"capacity: {resources.ENV_CAPACITY_QUEUES} is JSON",
        isinstance(policy, dict),
        env[resources.ENV_CAPACITY_QUEUES],
    ):
        return
    mappings = {m["UUID"]: m for m in _all_mappings(lambda_)}
    for kind in resources.LAMBDA_QUEUE_KINDS:
        var = resources.ENV_CAPACITY_MAPPING_PREFIX + kind.upper()
        mapping = mappings.get(env.get(var, ""))
        if not report.check(
            f"capacity: {var} names a deployed mapping", mapping is not None, env.get(var, "")
        ):
            continue
        assert mapping is not None
        url = env.get(resources.ENV_QUEUE_URL_PREFIX + kind.upper(), "")
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        report.equal(f"capacity: {var} is the {kind} queue's mapping", mapping["EventSourceArn"], arn)
        report.equal(
            f"capacity: the {kind} base is its mapping's MaximumConcurrency",
            (policy.get(kind) or {}).get("base"),
            (mapping.get("ScalingConfig") or {}).get("MaximumConcurrency"),
        )
    if resources.ENV_CAPACITY_CONTAINER_SERVICE in env:
        outputs = outputs or {}
        report.equal(
            f"capacity: {resources.ENV_CAPACITY_CONTAINER_SERVICE} is the container pool's service",
            env[resources.ENV_CAPACITY_CONTAINER_SERVICE],
            f"{outputs.get('ContainerCluster', '')}/{outputs.get('ContainerService', '')}",
        )
        report.equal(
            "capacity: the container queue's base is 0 (the scalable target's own minimum)",
            (policy.get(resources.CONTAINER_KIND) or {}).get("base"),
            0,
        )


def _all_mappings(lambda_: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for page in lambda_.get_paginator("list_event_source_mappings").paginate():
        found.extend(page["EventSourceMappings"])
    return found


def check_state_machine(report: Report, stepfunctions: Any, env: Mapping[str, str], partition: str) -> None:
    """The chunked-job state machine: substitutions resolved, every task sent to the execution's
    chunk queue (its input's ``queue_url``), the long queue when the input names none."""
    arn = env.get(resources.ENV_STATE_MACHINE_ARN)
    if not report.check(f"state machine: named by {resources.ENV_STATE_MACHINE_ARN}", bool(arn)):
        return
    described = stepfunctions.describe_state_machine(stateMachineArn=arn)
    definition = described["definition"]
    report.check("state machine: no unresolved ${...} left", "${" not in definition, _excerpt(definition))
    parsed = json.loads(definition)
    default = parsed.get("States", {}).get(LONG_QUEUE, {}).get("Result")
    urls = sorted(set(_values(parsed, "QueueUrl")) | ({default} if isinstance(default, str) else set()))
    report.equal("state machine: its tasks go to the long queue", urls, [env.get("JOBSCHED_QUEUE_URL_LONG")])
    paths = sorted(set(_values(parsed, "QueueUrl.$")))
    report.equal("state machine: its tasks go to the input's queue_url", paths, [QUEUE_URL_PATH])
    tasks = sorted(set(_values(json.loads(definition), "Resource")))
    report.check(
        f"state machine: task ARNs in partition {partition}",
        bool(tasks) and all(task.startswith(f"arn:{partition}:") for task in tasks),
        f"found {tasks}",
    )
    report.equal("state machine: a standard workflow", described.get("type"), "STANDARD")


def _values(node: Any, key: str) -> Iterable[str]:
    if isinstance(node, dict):
        for name, value in node.items():
            if name == key and isinstance(value, str):
                yield value
            else:
                yield from _values(value, key)
    elif isinstance(node, list):
        for item in node:
            yield from _values(item, key)


def _excerpt(text: str) -> str:
    start = text.find("${")
    return text[max(0, start - 40) : start + 40] if start >= 0 else ""


def check_bucket_and_topic(
    report: Report, s3: Any, sns: Any, env: Mapping[str, str], topic_arn: str | None
) -> None:
    bucket = env.get(resources.ENV_BUCKET)
    if report.check(f"bucket: named by {resources.ENV_BUCKET}", bool(bucket)):
        report.check("bucket: exists", _exists(lambda: s3.head_bucket(Bucket=bucket)), bucket or "")
    if report.check("alert topic: named by the AlertTopicArn output", bool(topic_arn)):
        report.check(
            "alert topic: exists",
            _exists(lambda: sns.get_topic_attributes(TopicArn=topic_arn)),
            topic_arn or "",
        )


def _exists(call: Any) -> bool:
    try:
        call()
    except Exception:  # any error answer means the resource is not usable
        return False
    return True


def check_functions(report: Report, deployment: Deployment) -> None:
    """Every function of runtime/resources deployed with its handler and timeout; their variables agree."""
    deployed = {config["Handler"]: config for config in deployment.functions.values()}
    for spec in resources.FUNCTIONS:
        config = deployed.get(spec.handler)
        if report.check(f"function {spec.name}: deployed with handler {spec.handler}", config is not None):
            assert config is not None
            report.equal(f"function {spec.name}: timeout", config["Timeout"], spec.timeout_seconds)
    conflicts = {k: v for k, v in deployment.disagreements().items() if k != "POWERTOOLS_SERVICE_NAME"}
    report.check("functions: their variables agree", not conflicts, f"differing: {sorted(conflicts)}")


def check_outputs(report: Report, outputs: Mapping[str, str], env: Mapping[str, str]) -> None:
    """The outputs docs/deploy.md lists, and the two that name a resource naming the same one as the
    functions' variables."""
    missing = [key for key in OUTPUTS if not outputs.get(key)]
    report.check("outputs: every documented output", not missing, f"missing: {missing}")
    report.equal(
        "outputs: PayloadBucket is the functions' bucket",
        outputs.get("PayloadBucket"),
        env.get(resources.ENV_BUCKET),
    )
    report.equal(
        "outputs: StateMachineArn is the functions' state machine",
        outputs.get("StateMachineArn"),
        env.get(resources.ENV_STATE_MACHINE_ARN),
    )


def check_log_group(report: Report, logs: Any, env: Mapping[str, str]) -> None:
    """The worker's log group, which the api function queries for a run's log lines (Logs Insights)."""
    name = env.get(resources.ENV_RUN_LOG_GROUP, "")
    if report.check(f"log group: named by {resources.ENV_RUN_LOG_GROUP}", bool(name)):
        found = logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"]
        report.check("log group: exists", any(group["logGroupName"] == name for group in found), name)


#: What the container pool's task definition must be (infra/containers.py, config defaults).
CONTAINER_COMMAND = ["jobsched", "worker", "--pool", resources.CONTAINER_KIND]
CONTAINER_PLATFORM = {"cpuArchitecture": "ARM64", "operatingSystemFamily": "LINUX"}


def check_container_pool(
    report: Report, ecs: Any, outputs: Mapping[str, str], env: Mapping[str, str], image: str
) -> None:
    """The container pool as ECS answers it: its cluster, its service (desired 0: it scales from 0 on
    the container queue), the task definition the service runs (arm64, the worker loop's command, the
    prebuilt ``image``) with the functions' variables. What the emulator cannot hold is not checked
    here: the image build and push, the tasks themselves, and the scaling target and policies, which
    moto's CloudFormation cannot create (the rehearsal deploys them as its stand-in resources, listed
    in its report as deployed "as placeholders")."""
    cluster, service_name = outputs.get("ContainerCluster", ""), outputs.get("ContainerService", "")
    if not report.check(
        "container pool: ContainerCluster and ContainerService outputs", bool(cluster and service_name)
    ):
        return
    clusters = ecs.describe_clusters(clusters=[cluster])["clusters"]
    report.check(
        "container pool: the cluster exists", any(c["status"] == "ACTIVE" for c in clusters), cluster
    )
    services = ecs.describe_services(cluster=cluster, services=[service_name])["services"]
    if not report.check("container pool: the service exists", len(services) == 1, service_name):
        return
    (service,) = services
    report.equal("container pool: the service starts with no task", service["desiredCount"], 0)
    task = ecs.describe_task_definition(taskDefinition=service["taskDefinition"])["taskDefinition"]
    report.equal(
        "container pool: the task runs on arm64 Linux", task.get("runtimePlatform"), CONTAINER_PLATFORM
    )
    report.check(
        "container pool: the task is a Fargate task", "FARGATE" in (task.get("requiresCompatibilities") or [])
    )
    (container,) = task["containerDefinitions"]
    report.equal(
        "container pool: the container runs the worker loop", container.get("command"), CONTAINER_COMMAND
    )
    report.equal("container pool: the container runs the prebuilt image", container.get("image"), image)
    variables = {item["name"]: item["value"] for item in container.get("environment", [])}
    differing = sorted(
        k for k, v in variables.items() if k != "POWERTOOLS_SERVICE_NAME" and env.get(k) not in (None, v)
    )
    report.check(
        "container pool: its variables agree with the functions'", not differing, f"differing: {differing}"
    )
    queue = resources.QueueSpec(resources.CONTAINER_KIND).env_var
    report.equal(f"container pool: it consumes the queue {queue} names", variables.get(queue), env.get(queue))


def check_image_asset(report: Report, assembly: Path) -> None:
    """The default synthesis (no ``container_image``) carries the repository's Dockerfile as an image
    asset for linux/arm64: what ``cdk deploy`` would build and push (the rehearsal cannot: no Docker)."""
    manifest = json.loads((assembly / "Jobsched.assets.json").read_text())
    images = list(manifest.get("dockerImages", {}).values())
    if report.check("image asset: the default synth has one", len(images) == 1, f"found {len(images)}"):
        source = images[0]["source"]
        report.equal("image asset: built from the Dockerfile", source.get("dockerFile"), "Dockerfile")
        report.equal("image asset: for linux/arm64", source.get("platform"), "linux/arm64")
