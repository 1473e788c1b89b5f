"""Tags on every resource: ``application``, ``stack``, ``component``, and the user's own ``tags``.

``application`` = ``jobsched``, ``stack`` = the stack's name, ``component`` = the construct a resource
belongs to (``tables``, ``queues``, ``workers``, ``observability``... the stack's direct children, in
kebab case; ``support`` for what CDK adds at the stack's level: its custom resources' functions and
roles). The user's come from the CDK context ``tags`` (``-c tags='{"team": "payments"}'``,
infra/config.py checks them against AWS's rules; they may not name the three above). CDK's ``Tags``
aspect puts them on every resource whose type takes tags, at synthesis (docs/deploy.md, "Tags").
"""

from __future__ import annotations

import re

import aws_cdk as cdk

from infra.config import StackConfig

APPLICATION = "jobsched"
#: The ``component`` of the resources CDK itself adds at the stack's level.
SUPPORT = "support"
#: A component's tag is set with a higher priority than the stack's own default.
_COMPONENT_PRIORITY = 200


def component_name(construct_id: str) -> str:
    """``LongJobs`` -> ``long-jobs``, ``Api`` -> ``api``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", construct_id).lower()


def apply_tags(stack: cdk.Stack, config: StackConfig) -> None:
    """Tag every taggable resource of ``stack``; call it once every construct is in the stack."""
    tags = cdk.Tags.of(stack)
    tags.add("application", APPLICATION)
    tags.add("stack", stack.stack_name)
    tags.add("component", SUPPORT)
    for key, value in config.tags.items():
        tags.add(key, value)
    for child in stack.node.children:
        if isinstance(child, cdk.CfnElement) or not _is_ours(child.node.id):
            continue
        cdk.Tags.of(child).add("component", component_name(child.node.id), priority=_COMPONENT_PRIORITY)


def _is_ours(construct_id: str) -> bool:
    """A construct of the stack's own (``Tables``, ``Key``...), not one CDK adds with a generated id
    (a provider's singleton function: a name ending in a 32-character hash, ``LogRetention...``)."""
    return not re.search(r"[0-9a-f]{32}$", construct_id) and not construct_id.startswith(
        ("LogRetention", "AWS")
    )
