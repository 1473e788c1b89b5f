"""The chunked-job state machine (Step Functions, standard workflow).

The definition comes from :func:`jobsched.long_jobs.asl.chunked_job_definition`, the same function
the embedded mode uses; the real ``long`` queue URL (the chunk queue of an execution whose input names
none) and the partition of the SQS integrations' ARNs are put in by ``definition_substitutions``. An
execution's tasks go to the queue its input names (``queue_url``: the long or the container queue,
from the run's pool), so the state machine's role may send to both.
Logging ALL (with execution data) to its own log group, X-Ray tracing on.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import StackConfig
from infra.encryption import grant_send
from infra.functions import make_log_group
from infra.nag import acknowledge
from jobsched.long_jobs.asl import DEFAULT_TASK_TIMEOUT_SECONDS, chunked_job_definition

QUEUE_URL_PLACEHOLDER = "LongQueueUrl"
PARTITION_PLACEHOLDER = "Partition"  # the SQS integrations' ARNs: arn:aws-cn:states:::sqs:... in China


class LongJobs(Construct):
    """``state_machine``: Plan -> Map(chunks) -> Complete, every task on the run's chunk queue: the
    ``long`` queue, or ``container_queue`` for a chunked job on the container pool."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        long_queue: sqs.IQueue,
        container_queue: sqs.IQueue | None = None,
        config: StackConfig,
        key: kms.IKey | None = None,
    ):
        super().__init__(scope, construct_id)
        definition = chunked_job_definition(
            "${" + QUEUE_URL_PLACEHOLDER + "}",
            max_concurrency=config.long_job_max_concurrency,
            heartbeat_seconds=config.long_job_heartbeat_seconds,
            partition="${" + PARTITION_PLACEHOLDER + "}",
        )
        log_group = make_log_group(self, "Logs", config=config, key=key)
        self.state_machine = sfn.StateMachine(
            self,
            "ChunkedJob",
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_string(json.dumps(definition)),
            definition_substitutions={
                QUEUE_URL_PLACEHOLDER: long_queue.queue_url,
                PARTITION_PLACEHOLDER: cdk.Aws.PARTITION,
            },
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            tracing_enabled=True,
            # A run's whole workflow: generous, each task is bounded by its own timeout and heartbeat.
            timeout=cdk.Duration.seconds(DEFAULT_TASK_TIMEOUT_SECONDS * 4),
        )
        # sendMessage.waitForTaskToken runs under the state machine's role: a producer of the chunk
        # queues (the long queue, and the container queue for chunked jobs on the container pool).
        self.container_queue = container_queue
        for queue in (long_queue, container_queue):
            if queue is not None:
                grant_send(queue, self.state_machine)
        acknowledge(
            self.state_machine,
            "AwsSolutions-IAM5[Resource::*]",
            "CDK's grants for CloudWatch Logs delivery (logs:CreateLogDelivery, "
            "logs:DescribeResourcePolicies, ...) and X-Ray (xray:PutTraceSegments, ...) use "
            "Resource '*' because those APIs support no resource-level permissions; no action is "
            "a wildcard.",
        )
