"""What one AWS call asks IAM for: batches and transactions map to the actions AWS authorizes them as,
on the resources the function's environment names (symbolic, as the template resolves them)."""

from __future__ import annotations

import pytest

from jobsched.local.iam.requests import Names, requests_of

ENV = {
    "JOBSCHED_RUNS_TABLE": "local-runs",
    "JOBSCHED_JOBS_TABLE": "local-jobs",
    "JOBSCHED_QUEUE_URL_DEFAULT": "http://127.0.0.1:5000/123456789012/local-default",
    "JOBSCHED_BUCKET": "local-payloads",
    "JOBSCHED_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:local-chunked",
    "JOBSCHED_NOTIFY_TOPIC_ARNS": "arn:aws:sns:us-east-1:123456789012:team-*",
}
RUNS = "arn:aws:dynamodb:us-east-1:123456789012:table/<JOBSCHED_RUNS_TABLE>"
JOBS = "arn:aws:dynamodb:us-east-1:123456789012:table/<JOBSCHED_JOBS_TABLE>"
DEFAULT = "arn:aws:sqs:us-east-1:123456789012:<JOBSCHED_QUEUE_URL_DEFAULT>"
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:<JOBSCHED_STATE_MACHINE_ARN>"
URL = ENV["JOBSCHED_QUEUE_URL_DEFAULT"]


@pytest.mark.parametrize(
    ("service", "operation", "params", "expected"),
    [
        ("dynamodb", "GetItem", {"TableName": "local-runs"}, [("dynamodb:GetItem", RUNS)]),
        (
            "dynamodb",
            "Query",
            {"TableName": "local-jobs", "IndexName": "due"},
            [("dynamodb:Query", JOBS + "/index/due")],
        ),
        (
            "dynamodb",
            "BatchGetItem",
            {"RequestItems": {"local-runs": {}, "local-jobs": {}}},
            [("dynamodb:BatchGetItem", RUNS), ("dynamodb:BatchGetItem", JOBS)],
        ),
        (
            "dynamodb",
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": {"TableName": "local-runs"}},
                    {"Update": {"TableName": "local-jobs"}},
                    {"ConditionCheck": {"TableName": "local-jobs"}},
                    {"Delete": {"TableName": "local-runs"}},
                ]
            },
            [
                ("dynamodb:PutItem", RUNS),
                ("dynamodb:UpdateItem", JOBS),
                ("dynamodb:ConditionCheckItem", JOBS),
                ("dynamodb:DeleteItem", RUNS),
            ],
        ),
        (
            "dynamodb",
            "TransactGetItems",
            {"TransactItems": [{"Get": {"TableName": "local-runs"}}]},
            [("dynamodb:GetItem", RUNS)],
        ),
        ("sqs", "SendMessageBatch", {"QueueUrl": URL, "Entries": []}, [("sqs:SendMessage", DEFAULT)]),
        ("sqs", "DeleteMessageBatch", {"QueueUrl": URL, "Entries": []}, [("sqs:DeleteMessage", DEFAULT)]),
        (
            "sqs",
            "ChangeMessageVisibilityBatch",
            {"QueueUrl": URL, "Entries": []},
            [("sqs:ChangeMessageVisibility", DEFAULT)],
        ),
        (
            "sqs",
            "GetQueueAttributes",
            {"QueueUrl": "http://h/123456789012/elsewhere"},
            [("sqs:GetQueueAttributes", "arn:aws:sqs:us-east-1:123456789012:elsewhere")],
        ),
        (
            "s3",
            "HeadObject",
            {"Bucket": "local-payloads", "Key": "a/b.json"},
            [("s3:GetObject", "arn:aws:s3:::<JOBSCHED_BUCKET>/a/b.json")],
        ),
        (
            "s3",
            "PutObject",
            {"Bucket": "local-payloads", "Key": "k"},
            [("s3:PutObject", "arn:aws:s3:::<JOBSCHED_BUCKET>/k")],
        ),
        (
            "s3",
            "ListObjectsV2",
            {"Bucket": "local-payloads"},
            [("s3:ListBucket", "arn:aws:s3:::<JOBSCHED_BUCKET>")],
        ),
        (
            "stepfunctions",
            "StartExecution",
            {"stateMachineArn": ENV["JOBSCHED_STATE_MACHINE_ARN"]},
            [("states:StartExecution", MACHINE)],
        ),
        (
            "stepfunctions",
            "DescribeExecution",
            {"executionArn": "arn:aws:states:us-east-1:123456789012:execution:local-chunked:run-1"},
            [
                (
                    "states:DescribeExecution",
                    "arn:aws:states:us-east-1:123456789012:execution:<JOBSCHED_STATE_MACHINE_ARN>:run-1",
                )
            ],
        ),
        (
            "stepfunctions",
            "SendTaskHeartbeat",
            {"taskToken": "opaque"},
            [("states:SendTaskHeartbeat", MACHINE)],
        ),
        (
            "sns",
            "Publish",
            {"TopicArn": "arn:aws:sns:us-east-1:123456789012:team-a"},
            [("sns:Publish", "<JOBSCHED_NOTIFY_TOPIC_ARNS>")],
        ),
        (
            "sns",
            "Publish",
            {"TopicArn": "arn:aws:sns:us-east-1:123456789012:ops"},
            [("sns:Publish", "arn:aws:sns:us-east-1:123456789012:ops")],
        ),
        ("cloudwatch", "PutMetricData", {"Namespace": "x"}, [("cloudwatch:PutMetricData", "*")]),
    ],
)
def test_requests_of(service: str, operation: str, params: dict, expected: list[tuple[str, str]]) -> None:
    # Given a call as botocore makes it, Then it is the actions IAM authorizes, on symbolic resources.
    assert requests_of(service, operation, params, Names(ENV)) == expected


def test_a_table_not_in_the_environment_keeps_its_name() -> None:
    # Given a table no variable names, Then its literal name is kept: no role can have granted it.
    assert requests_of("dynamodb", "GetItem", {"TableName": "stray"}, Names(ENV)) == [
        ("dynamodb:GetItem", "arn:aws:dynamodb:us-east-1:123456789012:table/stray")
    ]


def test_a_mapping_call_is_authorized_on_the_mapping_its_environment_names() -> None:
    # Given the capacity function's variable naming the low queue's mapping by its UUID
    names = Names({"JOBSCHED_CAPACITY_MAPPING_LOW": "3f0c-low"})
    mapping = "arn:aws:lambda:us-east-1:123456789012:event-source-mapping:"
    # Then Get/UpdateEventSourceMapping ask for that mapping's ARN, symbolic; another UUID stays literal
    assert requests_of("lambda", "UpdateEventSourceMapping", {"UUID": "3f0c-low"}, names) == [
        ("lambda:UpdateEventSourceMapping", mapping + "<JOBSCHED_CAPACITY_MAPPING_LOW>")
    ]
    assert requests_of("lambda", "GetEventSourceMapping", {"UUID": "other"}, names) == [
        ("lambda:GetEventSourceMapping", mapping + "other")
    ]
