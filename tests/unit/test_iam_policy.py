"""The offline IAM evaluator against AWS's documented policy evaluation logic (IAM User Guide:
"Policy evaluation logic", "The difference between explicit and implicit denies", "IAM JSON policy
elements: Action / NotAction / Resource / NotResource"). Each row is (statements, action, resource,
expected decision); many rows are denials, so a check built on this evaluator can fail."""

from __future__ import annotations

import pytest

from jobsched.local.iam.policy import (
    Decision,
    PolicyError,
    Statement,
    action_matches,
    evaluate,
    resource_matches,
    statements_of,
)

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/runs"
INDEX = TABLE + "/index/due"
QUEUE = "arn:aws:sqs:us-east-1:123456789012:jobs-default"
OBJECT = "arn:aws:s3:::payloads/outputs/t1/j1/r1/attempt-1.json"
MACHINES = "arn:aws:states:us-east-1:123456789012:"
EXECUTIONS = MACHINES + "execution:"
EXECUTION = EXECUTIONS + "chunked:run-1"

DESCRIBE = "states:DescribeExecution"
ALLOW = "Allow"
DENY = "Deny"
A = Decision.ALLOWED
EXPLICIT = Decision.EXPLICIT_DENY
IMPLICIT = Decision.IMPLICIT_DENY


def s(effect: str, **elements: object) -> dict[str, object]:
    return {"Effect": effect, **elements}


CASES = [
    # Given nothing allows it, When asked, Then it is implicitly denied (the default).
    ([], "dynamodb:GetItem", TABLE, IMPLICIT),
    ([s(ALLOW, Action="dynamodb:GetItem", Resource=TABLE)], "dynamodb:GetItem", TABLE, A),
    # Action names are case-insensitive; resources are case-sensitive.
    ([s(ALLOW, Action="DynamoDB:getitem", Resource=TABLE)], "dynamodb:GetItem", TABLE, A),
    ([s(ALLOW, Action="dynamodb:GetItem", Resource=TABLE.upper())], "dynamodb:GetItem", TABLE, IMPLICIT),
    # Another action, another resource: not allowed.
    ([s(ALLOW, Action="dynamodb:GetItem", Resource=TABLE)], "dynamodb:PutItem", TABLE, IMPLICIT),
    ([s(ALLOW, Action="dynamodb:Query", Resource=TABLE)], "dynamodb:Query", INDEX, IMPLICIT),
    ([s(ALLOW, Action="dynamodb:Query", Resource=TABLE + "/index/*")], "dynamodb:Query", INDEX, A),
    # Wildcards in actions.
    ([s(ALLOW, Action="dynamodb:*", Resource="*")], "dynamodb:DeleteItem", TABLE, A),
    ([s(ALLOW, Action="dynamodb:Get*", Resource="*")], "dynamodb:Query", TABLE, IMPLICIT),
    ([s(ALLOW, Action="sqs:?endMessage", Resource=QUEUE)], "sqs:SendMessage", QUEUE, A),
    ([s(ALLOW, Action="kms:GenerateDataKey*", Resource="*")], "kms:GenerateDataKey", "arn:k", A),
    # `?` is one character, `.` is literal (regular-expression pitfalls).
    (
        [s(ALLOW, Action="sqs:SendMessage", Resource=QUEUE.replace("default", "d?fault"))],
        "sqs:SendMessage",
        QUEUE,
        A,
    ),
    (
        [s(ALLOW, Action="sqs:SendMessage", Resource=QUEUE.replace("default", "d?fault"))],
        "sqs:SendMessage",
        QUEUE.replace("default", "dfault"),
        IMPLICIT,
    ),
    ([s(ALLOW, Action="s3:GetObject", Resource="arn:aws:s3:::pay.oads/*")], "s3:GetObject", OBJECT, IMPLICIT),
    # A `*` in the middle of a segment stays in it; one that ends a segment may run past colons.
    (
        [
            s(
                ALLOW,
                Action="states:DescribeExecution",
                Resource=EXECUTIONS + "chunked:*",
            )
        ],
        "states:DescribeExecution",
        EXECUTION,
        A,
    ),
    (
        [
            s(
                ALLOW,
                Action="states:DescribeExecution",
                Resource=EXECUTIONS + "other:*",
            )
        ],
        "states:DescribeExecution",
        EXECUTION,
        IMPLICIT,
    ),
    (
        [
            s(
                ALLOW,
                Action="states:DescribeExecution",
                Resource=MACHINES + "exec*n:chunked:run-1",
            )
        ],
        "states:DescribeExecution",
        EXECUTION,
        A,
    ),
    (
        [s(ALLOW, Action=DESCRIBE, Resource="arn:aws:states:us-east-1:1234*run-1")],
        "states:DescribeExecution",
        EXECUTION,
        IMPLICIT,
    ),
    ([s(ALLOW, Action="s3:GetObject", Resource="arn:aws:s3:::payloads/*")], "s3:GetObject", OBJECT, A),
    # An explicit deny wins over any allow, in whichever order.
    (
        [s(ALLOW, Action="*", Resource="*"), s(DENY, Action="dynamodb:DeleteItem", Resource=TABLE)],
        "dynamodb:DeleteItem",
        TABLE,
        EXPLICIT,
    ),
    (
        [s(DENY, Action="dynamodb:DeleteItem", Resource="*"), s(ALLOW, Action="dynamodb:*", Resource=TABLE)],
        "dynamodb:DeleteItem",
        TABLE,
        EXPLICIT,
    ),
    (
        [s(ALLOW, Action="*", Resource="*"), s(DENY, Action="dynamodb:DeleteItem", Resource=TABLE)],
        "dynamodb:GetItem",
        TABLE,
        A,
    ),
    # NotAction: applies to every action but those listed.
    ([s(ALLOW, NotAction="dynamodb:DeleteItem", Resource=TABLE)], "dynamodb:PutItem", TABLE, A),
    ([s(ALLOW, NotAction="dynamodb:DeleteItem", Resource=TABLE)], "dynamodb:DeleteItem", TABLE, IMPLICIT),
    (
        [s(ALLOW, Action="*", Resource="*"), s(DENY, NotAction=["sqs:*"], Resource="*")],
        "dynamodb:GetItem",
        TABLE,
        EXPLICIT,
    ),
    (
        [s(ALLOW, Action="*", Resource="*"), s(DENY, NotAction=["sqs:*"], Resource="*")],
        "sqs:SendMessage",
        QUEUE,
        A,
    ),
    # NotResource: applies to every resource but those listed (moto ignores it).
    ([s(ALLOW, Action="sqs:SendMessage", NotResource=QUEUE)], "sqs:SendMessage", QUEUE, IMPLICIT),
    ([s(ALLOW, Action="sqs:SendMessage", NotResource=QUEUE)], "sqs:SendMessage", QUEUE + "-2", A),
    (
        [s(ALLOW, Action="*", Resource="*"), s(DENY, Action="s3:*", NotResource="arn:aws:s3:::payloads/*")],
        "s3:GetObject",
        "arn:aws:s3:::other/x",
        EXPLICIT,
    ),
    (
        [s(ALLOW, Action="*", Resource="*"), s(DENY, Action="s3:*", NotResource="arn:aws:s3:::payloads/*")],
        "s3:GetObject",
        OBJECT,
        A,
    ),
    # A condition cannot be proved offline: a conditional allow allows nothing, a conditional deny applies.
    (
        [s(ALLOW, Action="*", Resource="*", Condition={"Bool": {"aws:SecureTransport": "true"}})],
        "dynamodb:GetItem",
        TABLE,
        IMPLICIT,
    ),
    (
        [
            s(ALLOW, Action="*", Resource="*"),
            s(DENY, Action="*", Resource="*", Condition={"Bool": {"aws:SecureTransport": "false"}}),
        ],
        "dynamodb:GetItem",
        TABLE,
        EXPLICIT,
    ),
]


@pytest.mark.parametrize(("statements", "action", "resource", "expected"), CASES)
def test_decision(
    statements: list[dict[str, object]], action: str, resource: str, expected: Decision
) -> None:
    # Given a role's statements, When a request is evaluated, Then the documented decision results.
    parsed = statements_of([{"Version": "2012-10-17", "Statement": statements}])
    assert evaluate(parsed, action, resource) is expected


def test_a_single_statement_object_is_read_like_a_list_of_one() -> None:
    document = {"Statement": {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": QUEUE}}
    assert evaluate(statements_of([document]), "sqs:SendMessage", QUEUE) is A


def test_statements_of_several_documents_combine_and_deny_still_wins() -> None:
    # Given two policies attached to one role, Then a deny in one overrides an allow in the other.
    allow = {"Statement": [s(ALLOW, Action="sqs:*", Resource="*")]}
    deny = {"Statement": [s(DENY, Action="sqs:SendMessage", Resource=QUEUE)]}
    assert evaluate(statements_of([allow, deny]), "sqs:SendMessage", QUEUE) is EXPLICIT


@pytest.mark.parametrize(
    "raw",
    [
        {"Effect": "Permit", "Action": "*", "Resource": "*"},
        {"Effect": "Allow", "Resource": "*"},
        {"Effect": "Allow", "Action": "*", "NotAction": "x:y", "Resource": "*"},
        {"Effect": "Allow", "Action": "*"},
    ],
)
def test_a_malformed_statement_is_refused(raw: dict[str, object]) -> None:
    with pytest.raises(PolicyError):
        Statement.parse(raw)


def test_a_policy_variable_is_refused_not_guessed() -> None:
    with pytest.raises(PolicyError):
        resource_matches("arn:aws:s3:::home/${aws:username}/*", "arn:aws:s3:::home/bob/x")


def test_matchers_directly() -> None:
    assert action_matches("states:SendTask*", "states:SendTaskHeartbeat")
    assert not action_matches("states:SendTask*", "states:StartExecution")
    assert resource_matches("*", "anything:at:all")
