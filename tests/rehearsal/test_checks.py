"""The checks of what a deployment created (jobsched/rehearsal/checks.py), on resources moto holds.

Given a deployment made right -- tables from runtime/resources, queues with redrive and visibility
6x their consumer's timeout, mappings as infra makes them, the chunked-job state machine -- every
check passes; then each test makes one resource wrong and sees its check fail, by name.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from moto import mock_aws

from jobsched.local.provision import Provisioned, provision
from jobsched.rehearsal import checks
from jobsched.runtime import resources

REGION = "us-east-1"
MAX_CONCURRENCY = {"high": 20, "default": 20, "low": 5, "long": 5}


@dataclass
class Deployed:
    clients: dict[str, Any]
    provisioned: Provisioned
    env: dict[str, str]
    deployment: checks.Deployment
    topic: str

    def report(self) -> checks.Report:
        report = checks.Report()
        deployment = checks.Deployment(
            {
                name: self.clients["lambda"].get_function_configuration(FunctionName=config["FunctionName"])
                for name, config in self.deployment.functions.items()
            },
            {},
        )
        checks.check_functions(report, deployment)
        checks.check_tables(report, self.clients["dynamodb"], self.env)
        checks.check_queues(
            report,
            self.clients["sqs"],
            self.clients["lambda"],
            self.env,
            deployment.functions,
            MAX_CONCURRENCY,
        )
        checks.check_state_machine(report, self.clients["stepfunctions"], self.env, "aws")
        checks.check_bucket_and_topic(report, self.clients["s3"], self.clients["sns"], self.env, self.topic)
        checks.check_log_group(report, self.clients["logs"], self.env)
        return report


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("functions/x.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        names = ("dynamodb", "sqs", "s3", "stepfunctions", "lambda", "iam", "sns", "logs")
        clients = {name: boto3.client(name, region_name=REGION) for name in names}
        provisioned = provision(
            dynamodb=clients["dynamodb"],
            sqs=clients["sqs"],
            s3=clients["s3"],
            stepfunctions=clients["stepfunctions"],
            prefix="t",
            visibility_timeout_seconds=6 * 900,
        )
        env = provisioned.environment() | {resources.ENV_RUN_LOG_GROUP: "worker-logs"}
        clients["logs"].create_log_group(logGroupName="worker-logs")
        role = clients["iam"].create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        functions = {}
        for spec in resources.FUNCTIONS:
            config = clients["lambda"].create_function(
                FunctionName=spec.name,
                Runtime="python3.12",
                Role=role,
                Handler=spec.handler,
                Timeout=spec.timeout_seconds,
                Code={"ZipFile": _zip()},
                Environment={"Variables": env},
            )
            functions[spec.name] = config
        for ref in provisioned.queues.values():
            clients["sqs"].set_queue_attributes(QueueUrl=ref.dlq_url, Attributes={"VisibilityTimeout": "360"})
            if ref.kind in MAX_CONCURRENCY:  # the container queue has no Lambda consumer
                clients["lambda"].create_event_source_mapping(
                    EventSourceArn=ref.arn,
                    FunctionName="worker",
                    BatchSize=1 if ref.kind == "long" else 10,
                    FunctionResponseTypes=["ReportBatchItemFailures"],
                    ScalingConfig={"MaximumConcurrency": MAX_CONCURRENCY[ref.kind]},
                )
            clients["lambda"].create_event_source_mapping(
                EventSourceArn=ref.dlq_arn,
                FunctionName="dlq_consumer",
                BatchSize=10,
                FunctionResponseTypes=["ReportBatchItemFailures"],
                ScalingConfig={"MaximumConcurrency": 2},
            )
        topic = clients["sns"].create_topic(Name="alerts")["TopicArn"]
        yield Deployed(clients, provisioned, env, checks.Deployment(functions, {}), topic)


def _failed(report: checks.Report) -> list[str]:
    return [result.name for result in report.failures]


def test_a_deployment_made_right_passes_every_check(deployed: Deployed) -> None:
    report = deployed.report()
    assert _failed(report) == []
    assert report.passed == len(report.results) > 80


def test_a_table_without_its_ttl_fails(deployed: Deployed) -> None:
    # Given the Runs table without its TTL attribute (as moto's CloudFormation leaves it, unpatched)
    deployed.clients["dynamodb"].update_time_to_live(
        TableName=deployed.env[resources.ENV_RUNS_TABLE],
        TimeToLiveSpecification={"Enabled": False, "AttributeName": "expires_at"},
    )
    assert _failed(deployed.report()) == ["table Runs: TTL attribute"]


def test_a_table_missing_its_index_fails(deployed: Deployed) -> None:
    dynamodb = deployed.clients["dynamodb"]
    name = deployed.env[resources.ENV_JOBS_TABLE]
    dynamodb.delete_table(TableName=name)
    dynamodb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "tenant", "KeyType": "HASH"},
            {"AttributeName": "job_id", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "tenant", "AttributeType": "S"},
            {"AttributeName": "job_id", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    assert _failed(deployed.report()) == ["table Jobs: attribute types", "table Jobs: indexes"]


def test_a_queue_that_hides_a_message_for_less_than_six_timeouts_fails(deployed: Deployed) -> None:
    url = deployed.provisioned.queues["default"].url
    deployed.clients["sqs"].set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "900"})
    assert _failed(deployed.report()) == ["queue default: visibility timeout >= 6x its consumer's timeout"]


def test_a_queue_without_redrive_fails(deployed: Deployed) -> None:
    url = deployed.provisioned.queues["low"].url
    deployed.clients["sqs"].set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    assert _failed(deployed.report()) == ["queue low: redrive to its DLQ after 5 receives"]


def test_a_mapping_without_partial_batch_responses_or_its_concurrency_fails(deployed: Deployed) -> None:
    lambda_ = deployed.clients["lambda"]
    arn = deployed.provisioned.queues["high"].arn
    (mapping,) = lambda_.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"]
    lambda_.update_event_source_mapping(
        UUID=mapping["UUID"], FunctionResponseTypes=[], ScalingConfig={"MaximumConcurrency": 7}
    )
    assert _failed(deployed.report()) == [
        "queue high: mapping reports batch item failures",
        "queue high: mapping MaximumConcurrency",
    ]


def test_a_state_machine_with_an_unresolved_substitution_fails(deployed: Deployed) -> None:
    # Given the definition as moto's CloudFormation leaves it, unpatched: ${LongQueueUrl} in place
    sfn = deployed.clients["stepfunctions"]
    arn = deployed.env[resources.ENV_STATE_MACHINE_ARN]
    definition = sfn.describe_state_machine(stateMachineArn=arn)["definition"]
    long_url = deployed.provisioned.queues["long"].url
    sfn.update_state_machine(stateMachineArn=arn, definition=definition.replace(long_url, "${LongQueueUrl}"))
    assert _failed(deployed.report()) == [
        "state machine: no unresolved ${...} left",
        "state machine: its tasks go to the long queue",
    ]


def test_a_missing_bucket_and_log_group_and_a_function_with_another_timeout_fail(deployed: Deployed) -> None:
    deployed.clients["s3"].delete_bucket(Bucket=deployed.env[resources.ENV_BUCKET])
    deployed.clients["logs"].delete_log_group(logGroupName="worker-logs")
    deployed.clients["lambda"].update_function_configuration(FunctionName="sweeper", Timeout=60)
    assert _failed(deployed.report()) == ["function sweeper: timeout", "bucket: exists", "log group: exists"]


def test_functions_that_disagree_on_a_resource_fail() -> None:
    # Given two functions naming different Runs tables (and, allowed, different service names)
    def config(runs: str, service: str) -> dict[str, Any]:
        variables = {resources.ENV_RUNS_TABLE: runs, "POWERTOOLS_SERVICE_NAME": service}
        return {"Handler": "h", "Timeout": 1, "Environment": {"Variables": variables}}

    deployment = checks.Deployment({"A": config("runs-1", "api"), "B": config("runs-2", "worker")}, {})
    report = checks.Report()
    checks.check_functions(report, deployment)
    assert report.failures[-1].name == "functions: their variables agree"
    assert "JOBSCHED_RUNS_TABLE" in report.failures[-1].detail
    assert (
        json.dumps(sorted(deployment.disagreements())) == '["JOBSCHED_RUNS_TABLE", "POWERTOOLS_SERVICE_NAME"]'
    )


def test_outputs_are_checked_against_the_functions_variables() -> None:
    env = {resources.ENV_BUCKET: "data", resources.ENV_STATE_MACHINE_ARN: "arn:sm"}
    outputs = {key: "x" for key in checks.OUTPUTS} | {"PayloadBucket": "data", "StateMachineArn": "arn:sm"}
    report = checks.Report()
    checks.check_outputs(report, outputs, env)
    assert report.failures == []
    del outputs["ApiUrl"]
    outputs["PayloadBucket"] = "other"
    report = checks.Report()
    checks.check_outputs(report, outputs, env)
    assert _failed(report) == [
        "outputs: every documented output",
        "outputs: PayloadBucket is the functions' bucket",
    ]


IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/jobsched:rehearsal"


def _container_pool(ecs: Any, env: dict[str, str], *, cpu_architecture: str = "ARM64") -> dict[str, str]:
    """A cluster, a Fargate task definition as infra/containers.py makes it, and its service at 0."""
    cluster = ecs.create_cluster(clusterName="pool")["cluster"]["clusterName"]
    task = ecs.register_task_definition(
        family="worker",
        requiresCompatibilities=["FARGATE"],
        networkMode="awsvpc",
        cpu="1024",
        memory="2048",
        runtimePlatform={"cpuArchitecture": cpu_architecture, "operatingSystemFamily": "LINUX"},
        containerDefinitions=[
            {
                "name": "Worker",
                "image": IMAGE,
                "command": ["jobsched", "worker", "--pool", "container"],
                "environment": [{"name": k, "value": v} for k, v in env.items()],
            }
        ],
    )["taskDefinition"]["taskDefinitionArn"]
    service = ecs.create_service(cluster=cluster, serviceName="svc", taskDefinition=task, desiredCount=0)
    return {"ContainerCluster": cluster, "ContainerService": service["service"]["serviceName"]}


@mock_aws
def test_the_container_pool_as_infra_makes_it_passes_and_an_x86_task_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    ecs = boto3.client("ecs", region_name=REGION)
    queue = resources.QueueSpec(resources.CONTAINER_KIND).env_var
    env = {queue: "https://sqs/container", resources.ENV_RUNS_TABLE: "runs"}
    # Given the pool as infra makes it, with the functions' variables / Then every check passes
    report = checks.Report()
    checks.check_container_pool(report, ecs, _container_pool(ecs, env), env, IMAGE)
    assert report.failures == [] and len(report.results) >= 9
    # Given an x86 task whose variables name another Runs table / Then those two checks fail, by name
    ecs.delete_cluster(cluster="pool")
    outputs = _container_pool(ecs, {**env, resources.ENV_RUNS_TABLE: "other"}, cpu_architecture="X86_64")
    report = checks.Report()
    checks.check_container_pool(report, ecs, outputs, env, IMAGE)
    assert _failed(report) == [
        "container pool: the task runs on arm64 Linux",
        "container pool: its variables agree with the functions'",
    ]


def test_the_default_synth_must_carry_an_arm64_image_asset(tmp_path) -> None:
    # Given an assets manifest with the Dockerfile's image for linux/arm64 / Then the checks pass
    source = {"directory": "asset.abc", "dockerFile": "Dockerfile", "platform": "linux/arm64"}
    (tmp_path / "Jobsched.assets.json").write_text(json.dumps({"dockerImages": {"abc": {"source": source}}}))
    report = checks.Report()
    checks.check_image_asset(report, tmp_path)
    assert report.failures == [] and len(report.results) == 3
    # Given one built for amd64 / Then its platform check fails; Given none / Then the first fails
    source["platform"] = "linux/amd64"
    (tmp_path / "Jobsched.assets.json").write_text(json.dumps({"dockerImages": {"abc": {"source": source}}}))
    report = checks.Report()
    checks.check_image_asset(report, tmp_path)
    assert _failed(report) == ["image asset: for linux/arm64"]
    (tmp_path / "Jobsched.assets.json").write_text(json.dumps({"dockerImages": {}}))
    report = checks.Report()
    checks.check_image_asset(report, tmp_path)
    assert _failed(report) == ["image asset: the default synth has one"]


def test_the_mapping_ceilings_checked_are_the_stacks_with_the_fair_shares_head_room():
    """The rehearsal expects what infra synthesizes (infra/config.py ``mapping_ceiling``): the fair
    share's head-room on high, default and low, none on long; ``fair_share`` from cdk.json when set."""
    import json
    from pathlib import Path

    from infra.config import StackConfig
    from jobsched.rehearsal.main import mapping_ceilings

    context = json.loads((Path(__file__).resolve().parents[2] / "cdk.json").read_text())["context"]
    config = StackConfig.from_context(context.get)
    assert mapping_ceilings(context) == {k: config.mapping_ceiling(k) for k in context["max_concurrency"]}
    assert mapping_ceilings(context) == {"high": 25, "default": 25, "low": 7, "long": 5}
    off = {**context, "fair_share": 1}
    assert mapping_ceilings(off) == context["max_concurrency"]
