"""The capacity function and its one-minute schedule (decision 0055, docs/scaling.md).

``Capacity`` runs :mod:`functions.capacity`: once a minute it reads the forecast (the Jobs table's due
index, the Runs table's in-flight ledger) and the queues' ages (the Leases table), and raises or lowers
each worker mapping's ``ScalingConfig.MaximumConcurrency`` between the queue's ``max_concurrency`` and
its ``capacity_max_concurrency`` cap. Its role may read those three tables and get and update exactly
the four worker mappings, nothing else (no table writes, no other mapping, no function).

With ``capacity_max_warm_tasks`` (> 0) it also raises the container pool's minimum task count ahead of
a forecast peak and lowers it after: the ``MinCapacity`` of the service's scalable target
(``RegisterScalableTarget``), never the desired count the service's step scaling sets. Its role then
also holds ``application-autoscaling:DescribeScalableTargets``/``RegisterScalableTarget`` (no
resource-level permission: a scalable target's ARN is an id AWS makes at registration, not known to
the template) and ``ecs:DescribeServices``/``ecs:UpdateService`` on that one service (Application
Auto Scaling checks that the caller of ``RegisterScalableTarget`` may make these on its target).

With ``capacity_max_provisioned`` (> 0) it also sets provisioned concurrency on the worker's alias
``live`` (infra/workers.py publishes it; the default and low mappings invoke it) ahead of a forecast
peak and deletes it after: ``lambda:Get/Put/DeleteProvisionedConcurrencyConfig`` on that one alias.

The schedule is EventBridge Scheduler's, in the dispatcher's schedule group, with its own role that may
invoke only this function, the same retry policy as the ticks and the same dead-letter queue.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StackConfig
from infra.dispatch import TICK_MAX_EVENT_AGE_SECONDS, TICK_RETRY_ATTEMPTS
from infra.encryption import SQS_PRODUCER_KEY_ACTIONS
from infra.functions import make_function
from infra.nag import acknowledge, skip_checkov
from infra.tables import Tables
from infra.workers import BATCH_SIZE, DEFAULT_BATCH_SIZE
from jobsched.compose.container_worker import DEFAULT_CONCURRENCY
from jobsched.core.pools import CONTAINER_QUEUE
from jobsched.runtime.resources import (
    CAPACITY_FUNCTION,
    ENV_CAPACITY_CONTAINER_SERVICE,
    ENV_CAPACITY_MAPPING_PREFIX,
    ENV_CAPACITY_MAX_PROVISIONED,
    ENV_CAPACITY_QUEUES,
    ENV_CAPACITY_WORKER_FUNCTION,
    JOBS_TABLE,
    LEASES_TABLE,
    RUNS_TABLE,
)

#: The Jobs table's index of due cursors, which the forecast queries (jobsched/aws/forecast_reads.py).
DUE_INDEX = next(index.name for index in JOBS_TABLE.indexes if index.name == "due_index")

#: What the capacity service calls on a mapping (jobsched/aws/capacity.py).
MAPPING_ACTIONS = ("lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping")
#: What it calls on the container service's scalable target (no resource-level permission), and what
#: Application Auto Scaling checks the caller of RegisterScalableTarget may do on the ECS service.
SCALABLE_TARGET_ACTIONS = (
    "application-autoscaling:DescribeScalableTargets",
    "application-autoscaling:RegisterScalableTarget",
)
SERVICE_VALIDATION_ACTIONS = ("ecs:DescribeServices", "ecs:UpdateService")
#: Why the role's policy holds write actions on Resource '*' (cdk-nag IAM5, checkov CKV_AWS_111).
SCALABLE_TARGET_REASON = (
    "Resource '*' for X-Ray tracing (no resource-level permissions) and for "
    "application-autoscaling:DescribeScalableTargets/RegisterScalableTarget: the one target it registers, "
    "the container service's, has an ARN AWS makes at registration (scalable-target/<id>), which the "
    "template cannot name; a condition on namespace or dimension would not narrow it to that service "
    "either. RegisterScalableTarget is sent with MinCapacity only (capacity_max_warm_tasks)."
)
#: What it calls on the worker's alias (jobsched/aws/capacity.py), authorized on the alias's ARN.
PROVISIONED_ACTIONS = (
    "lambda:GetProvisionedConcurrencyConfig",
    "lambda:PutProvisionedConcurrencyConfig",
    "lambda:DeleteProvisionedConcurrencyConfig",
)


def capacity_queues(config: StackConfig) -> dict[str, dict[str, int]]:
    """The policy the function reads (``JOBSCHED_CAPACITY_QUEUES``): per Lambda queue, its base (the
    mapping's configured MaximumConcurrency), its cap and its batch size (runs per invocation); with
    ``capacity_max_warm_tasks``, the container queue: base 0 (the scalable target's own minimum), that
    cap, and the runs a task takes at once (the container worker's concurrency)."""
    caps = config.capacity_caps()
    queues = {
        kind: {
            "base": config.mapping_ceiling(kind),
            "cap": caps[kind],
            "batch_size": BATCH_SIZE.get(kind, DEFAULT_BATCH_SIZE),
        }
        for kind in config.max_concurrency
    }
    if config.capacity_max_warm_tasks:
        queues[CONTAINER_QUEUE] = {
            "base": 0,
            "cap": config.capacity_max_warm_tasks,
            "batch_size": DEFAULT_CONCURRENCY,
        }
    return queues


class Capacity(Construct):
    """The ``capacity`` function, its grants and its one-minute schedule."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        config: StackConfig,
        environment: Mapping[str, str],
        tables: Tables,
        mappings: Mapping[str, sources.SqsEventSource],
        group: scheduler.IScheduleGroup,
        dead_letter_queue: sqs.IQueue,
        key: kms.IKey | None = None,
        container_service: ecs.FargateService | None = None,
        worker_alias: lambda_.Alias | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        own = {
            ENV_CAPACITY_QUEUES: json.dumps(capacity_queues(config), sort_keys=True),
            **{
                ENV_CAPACITY_MAPPING_PREFIX + kind.upper(): source.event_source_mapping_id
                for kind, source in mappings.items()
            },
        }
        if worker_alias is not None:
            own[ENV_CAPACITY_WORKER_FUNCTION] = worker_alias.version.lambda_.function_name
            own[ENV_CAPACITY_MAX_PROVISIONED] = str(config.capacity_max_provisioned)
        warm = container_service if config.capacity_max_warm_tasks else None
        if warm is not None:
            own[ENV_CAPACITY_CONTAINER_SERVICE] = f"{warm.cluster.cluster_name}/{warm.service_name}"
        self.function = make_function(
            self, CAPACITY_FUNCTION, code=code, config=config, key=key, environment={**environment, **own}
        )
        # Exactly the calls it makes (jobsched/aws/forecast_reads.py, queue_ages.py): the due index of
        # Jobs and the jobs' views, the in-flight ledger of Runs, the ages item of Leases. With the
        # stack's key, make_function has already granted kms:Decrypt (the tables' reads need no more).
        jobs = tables.table(JOBS_TABLE).table_arn
        for action, arn in (
            ("dynamodb:Query", f"{jobs}/index/{DUE_INDEX}"),
            ("dynamodb:BatchGetItem", jobs),
            ("dynamodb:Query", tables.table(RUNS_TABLE).table_arn),
            ("dynamodb:GetItem", tables.table(LEASES_TABLE).table_arn),
            # its usage item on the deployment row, once a minute (decision 0059 amended)
            ("dynamodb:UpdateItem", tables.table(LEASES_TABLE).table_arn),
        ):
            iam.Grant.add_to_principal(grantee=self.function, actions=[action], resource_arns=[arn])
        leases_key = tables.table(LEASES_TABLE).encryption_key
        if leases_key is not None:
            leases_key.grant_encrypt(self.function)
        iam.Grant.add_to_principal(
            grantee=self.function,
            actions=list(MAPPING_ACTIONS),
            resource_arns=[mappings[kind].event_source_mapping_arn for kind in sorted(mappings)],
        )
        if worker_alias is not None:
            # The alias's own ARN (function ARN + ":live"), not the function's nor another qualifier's.
            alias_arn = f"{worker_alias.version.lambda_.function_arn}:{worker_alias.alias_name}"
            iam.Grant.add_to_principal(
                grantee=self.function, actions=list(PROVISIONED_ACTIONS), resource_arns=[alias_arn]
            )
        if warm is not None:
            self._grant_scalable_target(warm)

        self.scheduler_role = role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
            description="EventBridge Scheduler: invoke the capacity function, dead-letter failures",
        )
        if key is not None:
            key.grant(role, *SQS_PRODUCER_KEY_ACTIONS)
        logical_id = cdk.Stack.of(self).resolve(self.function.node.default_child.logical_id)  # type: ignore[union-attr]
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>:*]",
            "The scheduler's invoke grant covers the function and its versions/aliases "
            "('<function ARN>:*') of this one function; the only action is lambda:InvokeFunction.",
        )
        # Not "Tick": the dispatcher's schedules alone are named so (the rehearsal counts them per shard).
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            description="capacity: pre-warm the worker mappings before forecast peaks, scale on age",
            schedule=scheduler.ScheduleExpression.rate(cdk.Duration.minutes(1)),
            schedule_group=group,
            target=targets.LambdaInvoke(
                self.function,
                input=scheduler.ScheduleTargetInput.from_object({}),
                dead_letter_queue=dead_letter_queue,
                max_event_age=cdk.Duration.seconds(TICK_MAX_EVENT_AGE_SECONDS),
                retry_attempts=TICK_RETRY_ATTEMPTS,
                role=role,
            ),
        )

    def _grant_scalable_target(self, service: ecs.FargateService) -> None:
        """The container service's scalable target: read and re-register it (its MinCapacity), and
        what Application Auto Scaling validates on the service for the caller of RegisterScalableTarget."""
        iam.Grant.add_to_principal(
            grantee=self.function, actions=list(SCALABLE_TARGET_ACTIONS), resource_arns=["*"]
        )
        iam.Grant.add_to_principal(
            grantee=self.function,
            actions=list(SERVICE_VALIDATION_ACTIONS),
            resource_arns=[service.service_arn],
        )
        policy = self.function.role.node.find_child("DefaultPolicy")  # type: ignore[union-attr]
        acknowledge(policy, "AwsSolutions-IAM5[Resource::*]", SCALABLE_TARGET_REASON)
        skip_checkov(policy, "CKV_AWS_111", SCALABLE_TARGET_REASON)
