"""Each recorded call checked against its function's role, and the grants no call used.

A recorded triple (function, action, resource) is evaluated against the function's role in a
synthesized template (:mod:`jobsched.local.iam.template`), together with the key actions the call
implies when the resource is encrypted with a customer-managed key (``encryption=cmk``): AWS calls
KMS with the caller's permissions, so the caller's role must allow them (:data:`KEY_ACTIONS`).

A grant is one (action pattern, resource pattern) pair of an ``Allow`` statement; it is *used* when a
recorded request that the role allows matches both patterns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from jobsched.local.iam.policy import Decision, action_matches, evaluate, resource_matches
from jobsched.local.iam.recorder import Recording
from jobsched.local.iam.template import Role, Roles, env_token
from jobsched.runtime import resources as r

#: Key actions AWS performs with the caller's permissions when the caller's action reaches a resource
#: encrypted with a customer-managed key. SQS: a producer needs GenerateDataKey and Decrypt, a consumer
#: Decrypt (SQS Developer Guide, "Key management"); S3 SSE-KMS: PutObject GenerateDataKey (and Decrypt
#: for multipart), GetObject Decrypt (S3 User Guide, "Using SSE-KMS"); DynamoDB: the table key is
#: decrypted with the caller's credentials (DynamoDB Developer Guide, "How DynamoDB uses AWS KMS");
#: Step Functions with a customer-managed key: starting an execution encrypts its input, reading one
#: decrypts it, a task response encrypts its output (Step Functions Developer Guide, "Data at rest
#: encryption").
KEY_ACTIONS: Mapping[str, tuple[str, ...]] = {
    "sqs:SendMessage": ("kms:GenerateDataKey", "kms:Decrypt"),
    "sqs:ReceiveMessage": ("kms:Decrypt",),
    "s3:PutObject": ("kms:GenerateDataKey", "kms:Decrypt"),
    "s3:GetObject": ("kms:Decrypt",),
    **{
        f"dynamodb:{op}": ("kms:Decrypt",)
        for op in (
            "GetItem",
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "Query",
            "Scan",
            "BatchGetItem",
            "BatchWriteItem",
            "ConditionCheckItem",
        )
    },
    "states:StartExecution": ("kms:GenerateDataKey",),
    "states:DescribeExecution": ("kms:Decrypt",),
    "states:SendTaskSuccess": ("kms:GenerateDataKey",),
    "states:SendTaskFailure": ("kms:GenerateDataKey",),
}


@dataclass(frozen=True)
class Checked:
    function: str
    action: str
    resource: str
    calls: int
    decision: Decision
    implied_by: str | None = None  # "sqs:SendMessage on <queue>" for a key action


@dataclass(frozen=True)
class Grant:
    function: str
    action: str
    resource: str
    sid: str | None = None


@dataclass
class Evaluation:
    checked: list[Checked] = field(default_factory=list)
    unused: list[Grant] = field(default_factory=list)
    missing_roles: list[str] = field(default_factory=list)
    used: set[tuple[str, str, str]] = field(default_factory=set)  # (function, action, resource) patterns
    total_grants: int = 0

    @property
    def denied(self) -> list[Checked]:
        return [c for c in self.checked if c.decision is not Decision.ALLOWED]


def _requests(role: Role, action: str, resource: str, roles: Roles) -> list[tuple[str, str, str | None]]:
    """The requests IAM evaluates for one recorded (action, resource): the call itself (a topic of the
    allow-list once per pattern the deployment's environment gives the function) and its key actions."""
    if resource == env_token(r.ENV_NOTIFY_TOPIC_ARNS):
        patterns = [p for p in role.environment.get(r.ENV_NOTIFY_TOPIC_ARNS, "").split(",") if p]
        targets = patterns or [resource]  # an empty allow-list: the call cannot be allowed
    else:
        targets = [resource]
    out: list[tuple[str, str, str | None]] = [(action, t, None) for t in targets]
    key = roles.key_for(resource)
    if key is not None:
        out += [(k, key, f"{action} on {resource}") for k in KEY_ACTIONS.get(action, ())]
    return out


def evaluate_recording(recording: Recording, roles: Roles) -> Evaluation:
    """Every recorded triple (and its implied key actions) against its function's role."""
    result = Evaluation()
    used: set[tuple[str, str, str]] = set()
    seen: dict[tuple[str, str, str, str | None], Checked] = {}
    for (function, action, resource), calls in sorted(recording.triples.items()):
        role = roles.roles.get(function)
        if role is None:
            result.missing_roles.append(function)
            continue
        for req_action, req_resource, implied_by in _requests(role, action, resource, roles):
            decision = evaluate(role.statements, req_action, req_resource)
            key = (function, req_action, req_resource, implied_by)
            if key in seen:
                continue
            seen[key] = Checked(function, req_action, req_resource, calls, decision, implied_by)
            if decision is Decision.ALLOWED:
                used.update(_grants_used(role, req_action, req_resource))
    result.checked = list(seen.values())
    result.used = used
    every = grants(roles.roles.values())
    result.total_grants = len(every)
    result.unused = [g for g in every if (g.function, g.action, g.resource) not in used]
    return result


def grants(roles: Iterable[Role]) -> list[Grant]:
    """Every (action pattern, resource pattern) of every Allow statement of ``roles``."""
    out = []
    for role in roles:
        for statement in role.statements:
            if statement.effect != "Allow":
                continue
            for action in statement.actions or ("NotAction",):
                for resource in statement.resources or ("NotResource",):
                    out.append(Grant(role.function, action, resource, statement.sid))
    return list(dict.fromkeys(out))


def _grants_used(role: Role, action: str, resource: str) -> set[tuple[str, str, str]]:
    used = set()
    for statement in role.statements:
        if statement.effect != "Allow" or statement.conditional or not statement.applies(action, resource):
            continue
        for pattern in statement.actions or ("NotAction",):
            if pattern != "NotAction" and not action_matches(pattern, action):
                continue
            for res in statement.resources or ("NotResource",):
                if res == "NotResource" or resource_matches(res, resource):
                    used.add((role.function, pattern, res))
    return used
