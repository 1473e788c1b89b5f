"""Acknowledging cdk-nag findings, always with a reason.

cdk-nag 3.x reads acknowledgements from CDK's ``Validations`` metadata; a finding id is either a rule
(``AwsSolutions-S1``) or a rule with its finding (``AwsSolutions-IAM5[Resource::*]``). One helper so
every acknowledgement in infra/ looks the same and none can be made without a reason.
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

PACK = "AwsSolutions"


def acknowledge(construct: IConstruct, finding: str, reason: str) -> None:
    """Acknowledge ``finding`` on ``construct`` and its children; ``reason`` says why it is acceptable.

    ``finding`` is written as cdk-nag prints it (``AwsSolutions-IAM5[Resource::*]``); the validation
    plugin's prefix (``AwsSolutions::``) is added here.
    """
    if len(reason.strip()) < 20:
        raise ValueError(f"acknowledging {finding} needs a real reason, got {reason!r}")
    cdk.Validations.of(construct).acknowledge(cdk.Acknowledgment(id=f"{PACK}::{finding}", reason=reason))


def acknowledge_index_access(construct: IConstruct, table_logical_ids: list[str]) -> None:
    """Acknowledge the ``<table>/index/*`` resource that DynamoDB grants add for Query on indexes."""
    for logical_id in table_logical_ids:
        acknowledge(
            construct,
            f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/index/*]",
            "Query on the table's own global secondary indexes needs the '<table ARN>/index/*' resource; "
            "it is scoped to this one table and the actions are listed explicitly.",
        )
