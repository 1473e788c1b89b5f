"""Acknowledging cdk-nag findings and skipping checkov checks, always with a reason.

cdk-nag 3.x reads acknowledgements from CDK's ``Validations`` metadata; a finding id is either a rule
(``AwsSolutions-S1``) or a rule with its finding (``AwsSolutions-IAM5[Resource::*]``). checkov reads
skips from the CloudFormation resource's own ``Metadata`` (``checkov: {skip: [{id, comment}]}``), so
they travel with the template. One helper for each, so every exception in infra/ looks the same and
none can be made without a reason; docs/deploy.md lists them.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

PACK = "AwsSolutions"


MIN_REASON = 20


def _check_reason(what: str, reason: str) -> None:
    if len(reason.strip()) < MIN_REASON:
        raise ValueError(f"acknowledging {what} needs a real reason, got {reason!r}")


def acknowledge(construct: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge ``finding`` on ``construct`` and its children; ``reason`` says why it is acceptable.

    ``finding`` is written as cdk-nag prints it (``AwsSolutions-IAM5[Resource::*]``); the validation
    plugin's prefix (``AwsSolutions::``) is added here.
    """
    _check_reason(finding, reason)
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=f"{PACK}::{finding}", reason=reason))


def skip_checkov(construct: IConstruct, check_id: str, reason: str) -> None:
    """Skip checkov's ``check_id`` (``CKV_AWS_117``) on ``construct``'s CloudFormation resource.

    ``construct`` is a ``CfnResource`` or an L2 construct (its ``default_child`` is used). The skip is
    written to the resource's ``Metadata`` with ``reason`` as its comment, next to earlier skips of
    the same resource; skipping one check twice on a resource is refused.
    """
    _check_reason(check_id, reason)
    resource = construct if isinstance(construct, cdk.CfnResource) else construct.node.default_child
    if not isinstance(resource, cdk.CfnResource):
        raise TypeError(f"{construct.node.path} has no CloudFormation resource to carry a checkov skip")
    skips = list((resource.get_metadata("checkov") or {}).get("skip", []))
    if any(skip["id"] == check_id for skip in skips):
        raise ValueError(f"{check_id} is already skipped on {construct.node.path}")
    resource.add_metadata("checkov", {"skip": [*skips, {"id": check_id, "comment": reason}]})


def rendered(scope: IConstruct, pseudo: str) -> str:
    """How cdk-nag prints the stack's ``AWS::Region``, ``AWS::AccountId`` or ``AWS::Partition`` in a
    finding: the literal value when the stack is bound to an environment (``CDK_DEFAULT_ACCOUNT``/
    ``CDK_DEFAULT_REGION``, as the CDK CLI sets them), else the token's name ``<AWS::Region>``.

    A finding id written with the tokens' names matches only an environment-agnostic synth: every
    acknowledgement that names an ARN builds it with this, so it matches in any account and region.
    """
    stack = cdk.Stack.of(scope)
    value = {"AWS::Region": stack.region, "AWS::AccountId": stack.account, "AWS::Partition": stack.partition}[
        pseudo
    ]
    return f"<{pseudo}>" if cdk.Token.is_unresolved(value) else value


def acknowledge_index_access(construct: IConstruct, table_logical_ids: list[str]) -> None:
    """Acknowledge the ``<table>/index/*`` resource that DynamoDB grants add for Query on indexes."""
    for logical_id in table_logical_ids:
        acknowledge(
            construct,
            f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/index/*]",
            "Query on the table's own global secondary indexes needs the '<table ARN>/index/*' resource; "
            "it is scoped to this one table and the actions are listed explicitly.",
        )
