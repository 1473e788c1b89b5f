"""What one AWS API call asks IAM for: the actions it is authorized as, each on a resource ARN.

A call is authorized as one or more IAM actions, not always its operation's name: a batch is
authorized per entry as the single operation (``SendMessageBatch`` -> ``sqs:SendMessage``,
``DeleteMessageBatch`` -> ``sqs:DeleteMessage``, ``ChangeMessageVisibilityBatch`` ->
``sqs:ChangeMessageVisibility``), a DynamoDB transaction per item (``TransactWriteItems`` ->
``PutItem``/``UpdateItem``/``DeleteItem``/``ConditionCheckItem`` on each item's table;
``TransactGetItems`` -> ``GetItem``), ``HeadObject`` as ``s3:GetObject``, ``ListObjectsV2`` as
``s3:ListBucket`` on the bucket. Sources: the Service Authorization Reference of each service and the
DynamoDB, SQS and S3 API references (docs/decisions/0038-permissions-proved-by-use.md).

Names: a resource the function's environment names (a table, queue, bucket or state machine in a
``JOBSCHED_*`` variable) is written ``<VARIABLE>`` (:func:`jobsched.local.iam.template.env_token`),
and partition, region and account are the canonical ones of :mod:`jobsched.local.iam.template`; a
topic in the ``JOBSCHED_NOTIFY_TOPIC_ARNS`` allow-list is ``<JOBSCHED_NOTIFY_TOPIC_ARNS>``; an event
source mapping whose UUID a ``JOBSCHED_CAPACITY_MAPPING_*`` variable holds is
``event-source-mapping:<VARIABLE>``. Anything else keeps its literal name (and is then most likely
denied: the roles name nothing else).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from jobsched.local.iam.policy import resource_matches
from jobsched.local.iam.template import ACCOUNT, PARTITION, REGION, env_token
from jobsched.runtime import resources as r

Request = tuple[str, str]  # (IAM action, resource ARN)

#: Operations authorized as another action than their own name.
ACTION_OF = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "s3:HeadObject": "s3:GetObject",
    "s3:ListObjectsV2": "s3:ListBucket",
    "s3:ListObjects": "s3:ListBucket",
    "s3:DeleteObjects": "s3:DeleteObject",
    "s3:CreateMultipartUpload": "s3:PutObject",
    "s3:UploadPart": "s3:PutObject",
    "s3:CompleteMultipartUpload": "s3:PutObject",
    "s3:AbortMultipartUpload": "s3:AbortMultipartUpload",
    "sns:PublishBatch": "sns:Publish",
    "dynamodb:TransactGetItems": "dynamodb:GetItem",
}
_TRANSACT_WRITE = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}
#: The IAM prefix of each botocore service name that differs from it.
_PREFIX = {"stepfunctions": "states", "cloudwatch": "cloudwatch"}
_NAMED = (
    *(spec.env_var for spec in r.TABLES),
    *(spec.env_var for spec in r.QUEUES),
    *(spec.dlq_env_var for spec in r.QUEUES),
    r.ENV_BUCKET,
)


class Names:
    """The symbolic name of each resource the environment names (value -> ``<VARIABLE>``)."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.by_value: dict[str, str] = {}
        for var in _NAMED:
            value = env.get(var)
            if value:
                self.by_value[value] = env_token(var)
        machine = env.get(r.ENV_STATE_MACHINE_ARN, "")
        self.machine_name = machine.rsplit(":", 1)[-1] if machine.count(":") >= 6 else None
        self.topics = [p.strip() for p in env.get(r.ENV_NOTIFY_TOPIC_ARNS, "").split(",") if p.strip()]
        # The capacity function's event source mappings (JOBSCHED_CAPACITY_MAPPING_<KIND>: a UUID).
        self.mappings = {
            value: env_token(var)
            for var, value in env.items()
            if var.startswith(r.ENV_CAPACITY_MAPPING_PREFIX) and value
        }

    def table(self, name_or_arn: str) -> str:
        name = name_or_arn.split(":table/", 1)[-1]
        return f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{self.by_value.get(name, name)}"

    def queue(self, url: str) -> str:
        if url in self.by_value:
            return f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{self.by_value[url]}"
        parts = urlparse(url).path.strip("/").split("/")
        account, name = (parts[-2], parts[-1]) if len(parts) >= 2 else (ACCOUNT, parts[-1])
        return f"arn:{PARTITION}:sqs:{REGION}:{account}:{name}"

    def bucket(self, name: str) -> str:
        return self.by_value.get(name, name)

    def machine(self, arn: str) -> str:
        """A state machine or execution ARN, its machine's name symbolic when it is the environment's."""
        parts = arn.split(":")
        if len(parts) >= 7 and self.machine_name is not None and parts[6] == self.machine_name:
            parts[6] = env_token(r.ENV_STATE_MACHINE_ARN)
        return ":".join([parts[0], PARTITION, *parts[2:3], REGION, ACCOUNT, *parts[5:]])

    def topic(self, arn: str) -> str:
        if any(resource_matches(pattern, arn) for pattern in self.topics):
            return env_token(r.ENV_NOTIFY_TOPIC_ARNS)
        return arn


def requests_of(service: str, operation: str, params: Mapping[str, Any], names: Names) -> list[Request]:
    """The (action, resource) pairs IAM evaluates for one call (distinct, in a stable order)."""
    prefix = _PREFIX.get(service, service)
    action = ACTION_OF.get(f"{prefix}:{operation}", f"{prefix}:{operation}")
    handler = _BY_SERVICE.get(prefix)
    found = handler(operation, action, params, names) if handler else [(action, "*")]
    return list(dict.fromkeys(found))


def _dynamodb(operation: str, action: str, params: Mapping[str, Any], names: Names) -> list[Request]:
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(action, names.table(t)) for t in params.get("RequestItems", {})]
    if operation == "TransactWriteItems":
        out = []
        for item in params.get("TransactItems", []):
            ((kind, body),) = item.items()
            out.append((_TRANSACT_WRITE[kind], names.table(body["TableName"])))
        return out
    if operation == "TransactGetItems":
        return [(action, names.table(item["Get"]["TableName"])) for item in params.get("TransactItems", [])]
    if "TableName" not in params:
        return [(action, "*")]  # ListTables, DescribeLimits: no resource-level permission
    table = names.table(params["TableName"])
    index = params.get("IndexName")
    return [(action, f"{table}/index/{index}" if index else table)]


def _sqs(operation: str, action: str, params: Mapping[str, Any], names: Names) -> list[Request]:
    if operation == "GetQueueUrl":
        account = params.get("QueueOwnerAWSAccountId", ACCOUNT)
        queue = names.by_value.get(
            next((v for v in names.by_value if v.endswith("/" + params["QueueName"])), "")
        )
        return [(action, f"arn:{PARTITION}:sqs:{REGION}:{account}:{queue or params['QueueName']}")]
    if "QueueUrl" not in params:
        return [(action, "*")]  # ListQueues
    return [(action, names.queue(params["QueueUrl"]))]


def _s3(operation: str, action: str, params: Mapping[str, Any], names: Names) -> list[Request]:
    bucket = f"arn:{PARTITION}:s3:::{names.bucket(params.get('Bucket', ''))}"
    if operation == "DeleteObjects":
        return [(action, f"{bucket}/{o['Key']}") for o in params.get("Delete", {}).get("Objects", [])]
    if operation == "CopyObject":
        source = params["CopySource"]
        if isinstance(source, Mapping):
            source_arn = f"arn:{PARTITION}:s3:::{names.bucket(source['Bucket'])}/{source['Key']}"
        else:
            src_bucket, _, src_key = str(source).lstrip("/").partition("/")
            source_arn = f"arn:{PARTITION}:s3:::{names.bucket(src_bucket)}/{src_key}"
        return [("s3:GetObject", source_arn), ("s3:PutObject", f"{bucket}/{params['Key']}")]
    return [(action, f"{bucket}/{params['Key']}" if "Key" in params else bucket)]


def _states(operation: str, action: str, params: Mapping[str, Any], names: Names) -> list[Request]:
    for key in ("executionArn", "stateMachineArn"):
        if key in params:
            return [(action, names.machine(params[key]))]
    if "taskToken" in params:
        # A task token names no resource; Step Functions authorizes SendTask* against the state
        # machine whose execution issued it. The only tokens a function answers are those of the
        # machine its environment names (the chunk messages it sends to the long queue).
        machine = names.env.get(r.ENV_STATE_MACHINE_ARN)
        return [(action, names.machine(machine) if machine else "*")]
    return [(action, "*")]


def _lambda(operation: str, action: str, params: Mapping[str, Any], names: Names) -> list[Request]:
    if "UUID" in params:  # Get/UpdateEventSourceMapping: authorized on the mapping's ARN
        uuid = str(params["UUID"])
        mapping = names.mappings.get(uuid, uuid)
        return [(action, f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:event-source-mapping:{mapping}")]
    return [(action, "*")]


def _sns(operation: str, action: str, params: Mapping[str, Any], names: Names) -> list[Request]:
    return [(action, names.topic(params["TopicArn"]) if "TopicArn" in params else "*")]


_BY_SERVICE = {
    "dynamodb": _dynamodb,
    "sqs": _sqs,
    "s3": _s3,
    "states": _states,
    "sns": _sns,
    "lambda": _lambda,
}
