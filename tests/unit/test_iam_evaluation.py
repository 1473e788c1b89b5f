"""A recording evaluated against a template: intrinsics resolved through the functions' environment,
the key actions a call implies on a customer-managed key, unused grants and their dispositions. The
template is a small hand-written CloudFormation document of the shape CDK synthesizes."""

from __future__ import annotations

import copy

from jobsched.local.iam.dispositions import Context, disposition_of
from jobsched.local.iam.evaluation import Grant
from jobsched.local.iam.policy import Decision
from jobsched.local.iam.recorder import Recording
from jobsched.local.iam.report import check
from jobsched.local.iam.template import read_roles

RUNS = "arn:aws:dynamodb:us-east-1:123456789012:table/<JOBSCHED_RUNS_TABLE>"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:<JOBSCHED_QUEUE_URL_DEFAULT>"
KEY = "arn:aws:kms:us-east-1:123456789012:key/<Key1>"


def _template(*, cmk: bool, key_actions: list[str]) -> dict:
    table = {"Type": "AWS::DynamoDB::Table", "Properties": {}}
    queue = {"Type": "AWS::SQS::Queue", "Properties": {}}
    statements = [
        {
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:Query"],
            "Resource": [
                {"Fn::GetAtt": ["Runs1", "Arn"]},
                {"Fn::Join": ["", [{"Fn::GetAtt": ["Runs1", "Arn"]}, "/index/*"]]},
            ],
        },
        {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": {"Fn::GetAtt": ["Queue1", "Arn"]}},
    ]
    resources = {"Runs1": table, "Queue1": queue}
    if cmk:
        table["Properties"]["SSESpecification"] = {"KMSMasterKeyId": {"Fn::GetAtt": ["Key1", "Arn"]}}
        queue["Properties"]["KmsMasterKeyId"] = {"Fn::GetAtt": ["Key1", "Arn"]}
        resources["Key1"] = {"Type": "AWS::KMS::Key", "Properties": {}}
        if key_actions:
            statements.append(
                {"Effect": "Allow", "Action": key_actions, "Resource": {"Fn::GetAtt": ["Key1", "Arn"]}}
            )
    resources |= {
        "Fn1": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": "functions.sweeper.handler",
                "Role": {"Fn::GetAtt": ["Role1", "Arn"]},
                "Environment": {
                    "Variables": {
                        "JOBSCHED_RUNS_TABLE": {"Ref": "Runs1"},
                        "JOBSCHED_QUEUE_URL_DEFAULT": {"Ref": "Queue1"},
                    }
                },
            },
        },
        "Role1": {"Type": "AWS::IAM::Role", "Properties": {}},
        "Policy1": {
            "Type": "AWS::IAM::Policy",
            "Properties": {"Roles": [{"Ref": "Role1"}], "PolicyDocument": {"Statement": statements}},
        },
    }
    return {"Resources": resources}


def _recording() -> Recording:
    recording = Recording()
    recording.add("sweeper", "dynamodb:GetItem", [("dynamodb:GetItem", RUNS)])
    recording.add("sweeper", "sqs:SendMessageBatch", [("sqs:SendMessage", QUEUE)])
    return recording


def test_intrinsics_resolve_to_the_names_the_calls_are_recorded_under() -> None:
    roles = read_roles(_template(cmk=False, key_actions=[]))
    resources = roles.roles["sweeper"].raw_statements[0]["Resource"]
    assert resources == [RUNS, RUNS + "/index/*"]


def test_calls_allowed_and_the_unused_grant_reported() -> None:
    # Given a role granting GetItem and Query (table and indexes) and SendMessage, and a recording of
    # a GetItem and a send, Then both are allowed and Query is reported unused.
    report = check(_recording(), _template(cmk=False, key_actions=[]), "aws")
    assert report.evaluation.denied == []
    unused = {(g.action, g.resource) for g in report.evaluation.unused}
    assert ("dynamodb:Query", RUNS) in unused and ("dynamodb:GetItem", RUNS) not in unused


def test_a_call_the_role_does_not_grant_is_denied() -> None:
    recording = _recording()
    recording.add("sweeper", "dynamodb:PutItem", [("dynamodb:PutItem", RUNS)])
    report = check(recording, _template(cmk=False, key_actions=[]), "aws")
    assert [(c.action, c.decision) for c in report.evaluation.denied] == [
        ("dynamodb:PutItem", Decision.IMPLICIT_DENY)
    ]


def test_with_a_customer_managed_key_the_implied_key_actions_are_checked_too() -> None:
    # Given the table and queue under a key, and a role with only kms:Decrypt on it,
    report = check(_recording(), _template(cmk=True, key_actions=["kms:Decrypt"]), "cmk")
    # Then the send's kms:GenerateDataKey is denied (SQS needs it from a producer), implied by the send
    denied = [(c.action, c.resource, c.implied_by) for c in report.evaluation.denied]
    assert denied == [("kms:GenerateDataKey", KEY, f"sqs:SendMessage on {QUEUE}")]
    # and with the producer's key actions granted, nothing is denied
    granted = check(
        _recording(), _template(cmk=True, key_actions=["kms:Decrypt", "kms:GenerateDataKey"]), "cmk"
    )
    assert granted.evaluation.denied == []


def test_an_explicit_deny_in_the_template_wins() -> None:
    template = _template(cmk=False, key_actions=[])
    denied = copy.deepcopy(template)
    statements = denied["Resources"]["Policy1"]["Properties"]["PolicyDocument"]["Statement"]
    statements.append({"Effect": "Deny", "Action": "sqs:*", "Resource": "*"})
    report = check(_recording(), denied, "aws")
    assert [(c.action, c.decision) for c in report.evaluation.denied] == [
        ("sqs:SendMessage", Decision.EXPLICIT_DENY)
    ]


def test_a_function_without_a_role_in_the_template_is_reported() -> None:
    recording = _recording()
    recording.add("api", "dynamodb:GetItem", [("dynamodb:GetItem", RUNS)])
    assert check(recording, _template(cmk=False, key_actions=[]), "aws").evaluation.missing_roles == ["api"]


# --- dispositions: a rule justifies an unused grant only where its condition holds -----------------


HIGH = "arn:aws:sqs:us-east-1:123456789012:<JOBSCHED_QUEUE_URL_HIGH>"


def test_a_consume_grant_is_the_mappings_only_on_a_queue_the_function_consumes() -> None:
    grant = Grant("worker", "sqs:ReceiveMessage", QUEUE)
    consuming = Context(used=frozenset(), consumed=frozenset({("worker", QUEUE)}))
    assert disposition_of(grant, consuming).kind == "platform"
    assert disposition_of(grant, Context(used=frozenset(), consumed=frozenset())) is None


def test_a_cdk_bundle_action_is_justified_only_where_the_function_used_the_resource() -> None:
    grant = Grant("sweeper", "dynamodb:Scan", RUNS)
    used = Context(used=frozenset({("sweeper", "dynamodb:GetItem", RUNS)}), consumed=frozenset())
    assert disposition_of(grant, used).kind == "cdk-grant"
    # a table the function never touched: its whole grant is unjustified (remove it)
    assert disposition_of(grant, Context(used=frozenset(), consumed=frozenset())) is None


def test_a_send_to_another_priority_and_the_high_workers_copy_of_the_workers_grants() -> None:
    send = Grant("dispatcher", "sqs:SendMessage", HIGH)
    sent_default = Context(used=frozenset({("dispatcher", "sqs:SendMessage", QUEUE)}), consumed=frozenset())
    assert disposition_of(send, sent_default).kind == "path"
    assert disposition_of(send, Context(used=frozenset(), consumed=frozenset())) is None
    # the high worker's copy of a grant is justified by the worker's use of it, and only then
    put = Grant(
        "worker_high",
        "dynamodb:PutItem",
        "arn:aws:dynamodb:us-east-1:123456789012:table/<JOBSCHED_LEASES_TABLE>",
    )
    by_worker = Context(used=frozenset({("worker", put.action, put.resource)}), consumed=frozenset())
    assert disposition_of(put, by_worker) is not None
    assert disposition_of(put, Context(used=frozenset(), consumed=frozenset())) is None
    # outputs over the inline limit: a path grant of both workers whether or not the suite wrote one
    big = Grant("worker_high", "s3:PutObject", "arn:aws:s3:::<JOBSCHED_BUCKET>/*")
    assert disposition_of(big, Context(used=frozenset(), consumed=frozenset())).kind == "path"


def _with_long_worker_and_container_pool(template: dict) -> dict:
    """The template plus a WorkerLong function and the container pool's task definition, each with a
    role of its own that may read the Runs table."""
    resources = copy.deepcopy(template["Resources"])
    read_runs = {
        "Effect": "Allow",
        "Action": "dynamodb:GetItem",
        "Resource": {"Fn::GetAtt": ["Runs1", "Arn"]},
    }
    environment = {"JOBSCHED_RUNS_TABLE": {"Ref": "Runs1"}, "JOBSCHED_QUEUE_URL_CONTAINER": {"Ref": "Queue2"}}
    resources |= {
        "Queue2": {"Type": "AWS::SQS::Queue", "Properties": {}},
        "WorkersWorkerLongA1": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Handler": "functions.worker.handler",
                "Role": {"Fn::GetAtt": ["LongRole", "Arn"]},
                "Environment": {"Variables": environment},
            },
        },
        "ContainerPoolTaskDef1": {
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "TaskRoleArn": {"Fn::GetAtt": ["TaskRole", "Arn"]},
                "ExecutionRoleArn": {"Fn::GetAtt": ["ExecutionRole", "Arn"]},
                "ContainerDefinitions": [
                    {
                        "Command": ["jobsched", "worker", "--pool", "container"],
                        "Environment": [{"Name": k, "Value": v} for k, v in environment.items()],
                    }
                ],
            },
        },
    }
    for role in ("LongRole", "TaskRole", "ExecutionRole"):
        resources[role] = {"Type": "AWS::IAM::Role", "Properties": {}}
        resources[f"{role}Policy"] = {
            "Type": "AWS::IAM::Policy",
            "Properties": {"Roles": [{"Ref": role}], "PolicyDocument": {"Statement": [read_runs]}},
        }
    return {"Resources": resources}


def test_the_long_worker_and_the_container_pools_task_role_are_judged_as_functions() -> None:
    # Given WorkerLong (the worker's handler) and the task definition running the container loop
    roles = read_roles(_with_long_worker_and_container_pool(_template(cmk=False, key_actions=[])))
    # Then they are read as worker_long and container_worker, the latter with its task role (not the
    # execution role) and its container's environment, and it consumes the container queue
    assert {"worker_long", "container_worker"} <= set(roles.roles)
    assert roles.roles["container_worker"].environment["JOBSCHED_RUNS_TABLE"] == "<JOBSCHED_RUNS_TABLE>"
    queue = "arn:aws:sqs:us-east-1:123456789012:<JOBSCHED_QUEUE_URL_CONTAINER>"
    assert ("container_worker", queue) in roles.consumed
    recording = Recording()
    for function in ("worker_long", "container_worker"):
        recording.add(function, "dynamodb:GetItem", [("dynamodb:GetItem", RUNS)])
    recording.add("container_worker", "dynamodb:PutItem", [("dynamodb:PutItem", RUNS)])
    report = check(
        recording, _with_long_worker_and_container_pool(_template(cmk=False, key_actions=[])), "aws"
    )
    assert [(d.function, d.action) for d in report.evaluation.denied] == [
        ("container_worker", "dynamodb:PutItem")
    ]


def test_a_grant_of_one_worker_is_justified_by_another_running_the_worker_code() -> None:
    # Given the container loop and WorkerLong run the worker's code: a grant one of them holds is
    # justified by another's use of it, and only by that
    put = Grant(
        "container_worker",
        "dynamodb:PutItem",
        "arn:aws:dynamodb:us-east-1:123456789012:table/<JOBSCHED_LEASES_TABLE>",
    )
    by_long = Context(used=frozenset({("worker_long", put.action, put.resource)}), consumed=frozenset())
    assert disposition_of(put, by_long) is not None
    assert disposition_of(put, Context(used=frozenset(), consumed=frozenset())) is None
    by_itself = Context(
        used=frozenset({("container_worker", "dynamodb:GetItem", put.resource)}), consumed=frozenset()
    )
    assert disposition_of(put, by_itself).kind == "cdk-grant"
