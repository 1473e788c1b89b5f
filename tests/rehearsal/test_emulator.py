"""The rehearsal's patches to moto's CloudFormation (jobsched/rehearsal/emulator.py), each on moto itself.

Each test deploys a small template through moto's CloudFormation (in this process, ``mock_aws``) with
the patches applied, and reads the result back through the service's own API, as the rehearsal does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from jobsched.rehearsal import emulator

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def patched(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    emulator.apply()
    yield
    emulator.restore()


def _deploy(template: dict, name: str = "s") -> dict[str, str]:
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))
    stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


@mock_aws
def test_an_unsupported_type_answers_ref_and_getatt() -> None:
    # Given an alarm (a type moto's CloudFormation does not know) whose ARN a dashboard-like output uses
    template = {
        "Resources": {
            "Alarm": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {"MetricName": "Errors", "Namespace": "x", "Threshold": 1},
            },
            "Schedule": {"Type": "AWS::Scheduler::Schedule", "Properties": {"Name": "tick-0"}},
        },
        "Outputs": {
            "AlarmArn": {"Value": {"Fn::GetAtt": ["Alarm", "Arn"]}},
            "Schedule": {"Value": {"Ref": "Schedule"}},
        },
    }
    # When it is deployed
    outputs = _deploy(template)
    # Then the stack is created and both answer as AWS would shape them
    assert outputs["AlarmArn"].startswith(f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:")
    assert outputs["Schedule"] == "tick-0"


@mock_aws(config={"stepfunctions": {"execute_state_machine": True}})
def test_a_state_machine_gets_its_substitutions_and_is_visible_to_the_api() -> None:
    # Given a queue and a state machine whose definition names it through DefinitionSubstitutions
    definition = {
        "StartAt": "Send",
        "States": {
            "Send": {
                "Type": "Task",
                "Resource": "arn:${Partition}:states:::sqs:sendMessage",
                "Parameters": {"QueueUrl": "${LongQueueUrl}", "MessageBody": "x"},
                "End": True,
            }
        },
    }
    template = {
        "Resources": {
            "Long": {"Type": "AWS::SQS::Queue"},
            "Machine": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "DefinitionString": json.dumps(definition),
                    "DefinitionSubstitutions": {"LongQueueUrl": {"Ref": "Long"}, "Partition": "aws"},
                    "RoleArn": "arn:aws:iam::123456789012:role/states",
                },
            },
        },
        "Outputs": {"Arn": {"Value": {"Ref": "Machine"}}, "Url": {"Value": {"Ref": "Long"}}},
    }
    # When it is deployed with executions switched on (the API then serves moto's other backend)
    outputs = _deploy(template)
    # Then the API knows the state machine, and its definition names the queue, nothing left unresolved
    described = boto3.client("stepfunctions", region_name=REGION).describe_state_machine(
        stateMachineArn=outputs["Arn"]
    )
    assert "${" not in described["definition"]
    resolved = json.loads(described["definition"])["States"]["Send"]
    assert resolved["Parameters"]["QueueUrl"] == outputs["Url"]
    assert resolved["Resource"] == "arn:aws:states:::sqs:sendMessage"


@mock_aws
def test_a_table_gets_its_ttl_and_point_in_time_recovery() -> None:
    template = {
        "Resources": {
            "Runs": {
                "Type": "AWS::DynamoDB::Table",
                "Properties": {
                    "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                    "BillingMode": "PAY_PER_REQUEST",
                    "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                },
            }
        },
        "Outputs": {"Name": {"Value": {"Ref": "Runs"}}},
    }
    name = _deploy(template)["Name"]
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "expires_at")
    backups = dynamodb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
    assert backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"


@mock_aws
def test_a_key_created_with_a_policy_object_answers() -> None:
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "kms:*", "Resource": "*"}],
    }
    template = {
        "Resources": {"Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": policy}}},
        "Outputs": {"Id": {"Value": {"Ref": "Key"}}},
    }
    key = _deploy(template)["Id"]
    kms = boto3.client("kms", region_name=REGION)
    assert kms.describe_key(KeyId=key)["KeyMetadata"]["KeyState"] == "Enabled"
    assert json.loads(kms.get_key_policy(KeyId=key, PolicyName="default")["Policy"]) == policy


@mock_aws
def test_a_key_tagged_in_cloudformations_shape_is_created_with_its_tags() -> None:
    # Given a key with Tags as CloudFormation writes them (Key, Value), as infra/tags.py tags every one
    tags = [{"Key": "application", "Value": "jobsched"}, {"Key": "team", "Value": "payments"}]
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "kms:*", "Resource": "*"}],
    }
    template = {
        "Resources": {"Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": policy, "Tags": tags}}},
        "Outputs": {"Id": {"Value": {"Ref": "Key"}}},
    }
    # When it is deployed / Then the stack is created and the key carries them
    key = _deploy(template)["Id"]
    listed = boto3.client("kms", region_name=REGION).list_resource_tags(KeyId=key)["Tags"]
    assert {t["TagKey"]: t["TagValue"] for t in listed} == {"application": "jobsched", "team": "payments"}


@mock_aws
def test_an_update_keeps_a_defaulted_parameter_and_a_resource_moto_cannot_update() -> None:
    # Given a stack with a defaulted parameter (as the CDK's BootstrapVersion) and a table
    table = {
        "Type": "AWS::DynamoDB::Table",
        "DeletionPolicy": "Delete",
        "Properties": {
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
        },
    }
    template = {
        "Parameters": {"Version": {"Type": "String", "Default": "30"}},
        "Resources": {"Jobs": table},
        "Outputs": {"Name": {"Value": {"Ref": "Jobs"}}, "Version": {"Value": {"Ref": "Version"}}},
    }
    before = _deploy(template)
    # When an update changes what moto cannot update (the table's DeletionPolicy) and keeps the parameter
    changed = json.loads(json.dumps(template))
    changed["Resources"]["Jobs"]["DeletionPolicy"] = "Retain"
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.update_stack(
        StackName="s",
        TemplateBody=json.dumps(changed),
        Parameters=[{"ParameterKey": "Version", "UsePreviousValue": True}],
    )
    # Then the update succeeds and the table is still what its Ref names
    stack = cloudformation.describe_stacks(StackName="s")["Stacks"][0]
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    after = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    assert after == before == {"Name": before["Name"], "Version": "30"}


@mock_aws
def test_a_queue_mapping_is_readable_but_delivers_nothing() -> None:
    # Given a function and an SQS event source mapping to it, with batch size and concurrency
    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lambda_ = boto3.client("lambda", region_name=REGION)
    function = lambda_.create_function(
        FunctionName="worker",
        Runtime="python3.12",
        Role=role,
        Handler="x.handler",
        Code={"ZipFile": _zip()},
    )["FunctionArn"]
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="runs")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    lambda_.create_event_source_mapping(
        EventSourceArn=arn,
        FunctionName=function,
        BatchSize=10,
        FunctionResponseTypes=["ReportBatchItemFailures"],
        ScalingConfig={"MaximumConcurrency": 20},
    )
    # When a message is sent to the queue
    sqs.send_message(QueueUrl=url, MessageBody="run")
    # Then moto did not hand it to the function (which would need Docker): this is its first receive
    received = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["ApproximateReceiveCount"]
    )["Messages"]
    assert [(m["Body"], m["Attributes"]["ApproximateReceiveCount"]) for m in received] == [("run", "1")]
    (mapping,) = lambda_.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 20}
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def _zip() -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x.py", "def handler(event, context):\n    return None\n")
    return buffer.getvalue()


def test_substitute_replaces_only_the_names_given() -> None:
    text = '{"a": "${LongQueueUrl}", "b": "${Other}", "c": "arn:${Partition}:states"}'
    assert emulator.substitute(text, {"LongQueueUrl": "https://q", "Partition": "aws-cn"}) == (
        '{"a": "https://q", "b": "${Other}", "c": "arn:aws-cn:states"}'
    )


def test_restore_undoes_every_replacement() -> None:
    from moto.stepfunctions.models import StateMachine

    patched = StateMachine.__dict__["create_from_cloudformation_json"]
    emulator.restore()
    assert StateMachine.__dict__["create_from_cloudformation_json"] is not patched
    emulator.apply()
    assert StateMachine.__dict__["create_from_cloudformation_json"] is not patched  # a fresh wrapper


_NETWORK = {
    "Vpc": {"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
    "Subnet": {
        "Type": "AWS::EC2::Subnet",
        "Properties": {"VpcId": {"Ref": "Vpc"}, "CidrBlock": "10.0.0.0/24"},
    },
    "Routes": {"Type": "AWS::EC2::RouteTable", "Properties": {"VpcId": {"Ref": "Vpc"}}},
    "Association": {
        "Type": "AWS::EC2::SubnetRouteTableAssociation",
        "Properties": {"RouteTableId": {"Ref": "Routes"}, "SubnetId": {"Ref": "Subnet"}},
    },
    "Gateway": {"Type": "AWS::EC2::InternetGateway", "Properties": {}},
    "Attachment": {
        "Type": "AWS::EC2::VPCGatewayAttachment",
        "Properties": {"VpcId": {"Ref": "Vpc"}, "InternetGatewayId": {"Ref": "Gateway"}},
    },
    "DefaultRoute": {
        "Type": "AWS::EC2::Route",
        "DependsOn": ["Attachment"],
        "Properties": {
            "RouteTableId": {"Ref": "Routes"},
            "DestinationCidrBlock": "0.0.0.0/0",
            "GatewayId": {"Ref": "Gateway"},
        },
    },
}


@mock_aws
def test_a_stack_with_a_public_subnets_vpc_is_deleted_with_its_network() -> None:
    # Given a VPC with a public subnet: route table, association, internet gateway, its attachment, route
    _deploy({"Resources": _NETWORK})
    ec2 = boto3.client("ec2", region_name=REGION)
    # When the stack is deleted
    boto3.client("cloudformation", region_name=REGION).delete_stack(StackName="s")
    # Then every one of them is gone (moto alone refuses: the VPC has dependencies)
    assert [v for v in ec2.describe_vpcs()["Vpcs"] if not v["IsDefault"]] == []
    assert ec2.describe_internet_gateways()["InternetGateways"] == []


def _task_definition(command: list[str], shards: str) -> dict:
    return {
        "Type": "AWS::ECS::TaskDefinition",
        "Properties": {
            "Cpu": "1024",
            "Memory": "2048",
            "NetworkMode": "awsvpc",
            "RequiresCompatibilities": ["FARGATE"],
            "RuntimePlatform": {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"},
            "ContainerDefinitions": [
                {
                    "Name": "Worker",
                    "Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/jobsched:1",
                    "Command": command,
                    "Environment": [{"Name": "JOBSCHED_SHARDS", "Value": shards}],
                }
            ],
        },
    }


def _service_stack(shards: str) -> dict:
    return {
        "Resources": {
            "Cluster": {"Type": "AWS::ECS::Cluster", "Properties": {}},
            "TaskDef": _task_definition(["jobsched", "worker", "--pool", "container"], shards),
            "Service": {
                "Type": "AWS::ECS::Service",
                "Properties": {
                    "Cluster": {"Ref": "Cluster"},
                    "TaskDefinition": {"Ref": "TaskDef"},
                    "DesiredCount": 0,
                },
            },
        },
        "Outputs": {"Cluster": {"Value": {"Ref": "Cluster"}}},
    }


def _task_of_service(cluster: str) -> dict:
    ecs = boto3.client("ecs", region_name=REGION)
    (arn,) = ecs.list_services(cluster=cluster)["serviceArns"]
    (service,) = ecs.describe_services(cluster=cluster, services=[arn])["services"]
    return ecs.describe_task_definition(taskDefinition=service["taskDefinition"])["taskDefinition"]


@mock_aws
def test_a_fargate_task_definition_keeps_its_platform_and_size_and_follows_an_update() -> None:
    # Given a Fargate task definition for arm64, run by a service
    cluster = _deploy(_service_stack("4"))["Cluster"]
    # Then ECS answers the platform, the CPU and the compatibilities the template gave
    task = _task_of_service(cluster)
    assert task["runtimePlatform"] == {"cpuArchitecture": "ARM64", "operatingSystemFamily": "LINUX"}
    assert (task["cpu"], task["memory"], task["networkMode"]) == ("1024", "2048", "awsvpc")
    assert "FARGATE" in task["requiresCompatibilities"]
    # When an update changes the container's environment (a new revision)
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    cloudformation.update_stack(StackName="s", TemplateBody=json.dumps(_service_stack("8")))
    # Then the service runs the new revision, whose container reads as ECS answers it
    task = _task_of_service(cluster)
    (container,) = task["containerDefinitions"]
    assert container["environment"] == [{"name": "JOBSCHED_SHARDS", "value": "8"}]
    assert container["command"] == ["jobsched", "worker", "--pool", "container"]
    assert task["runtimePlatform"]["cpuArchitecture"] == "ARM64"
