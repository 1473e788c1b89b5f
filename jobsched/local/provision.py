"""Provision the tables, queues (+ DLQs with redrive), bucket and state machine of the embedded mode.

Everything is built from the specs in :mod:`jobsched.runtime.resources` -- the same definitions ``infra/``
turns into CloudFormation -- so the local mode and the cloud cannot drift. The result,
:class:`Provisioned`, knows the physical names and renders the environment variables the functions
read (the same variables infra sets on the Lambda functions).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobsched.runtime import resources

ROLE_ARN = "arn:aws:iam::123456789012:role/jobsched-local-states"  # moto accepts any well-formed role


@dataclass(frozen=True)
class QueueRef:
    """A provisioned queue and its dead-letter queue."""

    kind: str
    url: str
    arn: str
    dlq_url: str
    dlq_arn: str


@dataclass(frozen=True)
class Provisioned:
    """Physical names of everything :func:`provision` created."""

    tables: dict[str, str]  # env var -> table name
    queues: dict[str, QueueRef]  # queue kind -> queue
    bucket: str
    state_machine_arn: str | None = None

    @classmethod
    def from_environment(cls, env: Mapping[str, str], sqs: Any) -> Provisioned:
        """What a deployment created, named by the functions' environment variables (the deploy
        rehearsal runs the embedded mode on a deployed stack's resources this way); the queue ARNs are
        asked of SQS. A variable that is missing raises KeyError naming it."""
        queues = {}
        for spec in resources.QUEUES:
            url, dlq_url = env[spec.env_var], env[spec.dlq_env_var]
            queues[spec.kind] = QueueRef(
                spec.kind, url, _queue_arn(sqs, url), dlq_url, _queue_arn(sqs, dlq_url)
            )
        return cls(
            tables={spec.env_var: env[spec.env_var] for spec in resources.TABLES},
            queues=queues,
            bucket=env[resources.ENV_BUCKET],
            state_machine_arn=env.get(resources.ENV_STATE_MACHINE_ARN) or None,
        )

    def environment(self) -> dict[str, str]:
        """The resource environment variables, named by :mod:`jobsched.runtime.resources`."""
        env = dict(self.tables)
        env[resources.ENV_BUCKET] = self.bucket
        for spec in resources.QUEUES:
            ref = self.queues[spec.kind]
            env[spec.env_var] = ref.url
            env[spec.dlq_env_var] = ref.dlq_url
        if self.state_machine_arn:
            env[resources.ENV_STATE_MACHINE_ARN] = self.state_machine_arn
        return env


def table_name(prefix: str, spec: resources.TableSpec) -> str:
    return f"{prefix}-{spec.logical_name.lower()}"


def provision_tables(dynamodb: Any, prefix: str) -> dict[str, str]:
    """Create every table of ``resources.TABLES`` (with its indexes and TTL); env var -> name."""
    names: dict[str, str] = {}
    for spec in resources.TABLES:
        name = table_name(prefix, spec)
        dynamodb.create_table(**spec.create_table_kwargs(name))
        if spec.ttl_attribute:
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.ttl_attribute},
            )
        names[spec.env_var] = name
    return names


def provision_queues(sqs: Any, prefix: str, *, visibility_timeout_seconds: int) -> dict[str, QueueRef]:
    """Create each queue of ``resources.QUEUES`` with its DLQ and a redrive policy, as infra does."""
    refs: dict[str, QueueRef] = {}
    for spec in resources.QUEUES:
        dlq_url = sqs.create_queue(
            QueueName=f"{prefix}-{spec.kind}-dlq",
            Attributes={"MessageRetentionPeriod": str(spec.dlq_retention_days * 86400)},
        )["QueueUrl"]
        dlq_arn = _queue_arn(sqs, dlq_url)
        redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": spec.max_receive_count}
        url = sqs.create_queue(
            QueueName=f"{prefix}-{spec.kind}",
            Attributes={
                "VisibilityTimeout": str(visibility_timeout_seconds),
                "MessageRetentionPeriod": str(spec.retention_days * 86400),
                "RedrivePolicy": json.dumps(redrive),
            },
        )["QueueUrl"]
        refs[spec.kind] = QueueRef(spec.kind, url, _queue_arn(sqs, url), dlq_url, dlq_arn)
    return refs


def _queue_arn(sqs: Any, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def provision_bucket(s3: Any, prefix: str) -> str:
    name = f"{prefix}-data"
    s3.create_bucket(Bucket=name)
    return name


def provision_state_machine(stepfunctions: Any, prefix: str, long_queue_url: str) -> str | None:
    """Create the chunked-jobs state machine from ``jobsched.long_jobs.asl`` when that module exists.

    Returns None (and the functions then run without long jobs) while the module is not there yet.
    """
    try:
        asl = importlib.import_module("jobsched.long_jobs.asl")
    except ModuleNotFoundError:
        return None
    definition = asl.chunked_job_definition(long_queue_url)
    response = stepfunctions.create_state_machine(
        name=f"{prefix}-chunked",
        definition=json.dumps(definition),
        roleArn=ROLE_ARN,
        type="STANDARD",
    )
    return str(response["stateMachineArn"])


def provision(
    *, dynamodb: Any, sqs: Any, s3: Any, stepfunctions: Any, prefix: str, visibility_timeout_seconds: int
) -> Provisioned:
    """Create every resource of the embedded mode under ``prefix`` and return their names."""
    queues = provision_queues(sqs, prefix, visibility_timeout_seconds=visibility_timeout_seconds)
    return Provisioned(
        tables=provision_tables(dynamodb, prefix),
        queues=queues,
        bucket=provision_bucket(s3, prefix),
        state_machine_arn=provision_state_machine(stepfunctions, prefix, queues["long"].url),
    )
