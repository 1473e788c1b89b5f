"""The jobsched stack: composes the constructs, wires their names into the functions, outputs.

It builds nothing itself but the deployment's one customer-managed key (``encryption=cmk``,
infra/encryption.py), which every construct shares: every other resource belongs to one construct
(tables, storage, queues, long_jobs, dispatch, workers, api, observability). The stack only hands
each construct what it needs and sets the stack outputs (API URL, dashboard URL, alert topic).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.api import Api
from infra.bundling import (
    LAMBDA_PYTHON_VERSION,
    bytecode_interpreter,
    bytecode_warning,
    code_asset,
    code_version_of,
)
from infra.capacity import Capacity
from infra.config import StackConfig
from infra.console import ConsoleUserPool
from infra.containers import ContainerPool
from infra.dispatch import Dispatch
from infra.encryption import stack_key
from infra.functions import function_spec
from infra.long_jobs import LongJobs
from infra.nag import acknowledge, acknowledge_index_access
from infra.observability import Observability, Watched
from infra.queries import SavedQueries
from infra.queues import DLQ_CONSUMER, QUEUE_CONSUMER, Queues
from infra.storage import PayloadStore
from infra.tables import Tables
from infra.tags import apply_tags
from infra.workers import Workers
from jobsched.core.shares import format_tenant_slots
from jobsched.runtime.resources import (
    CONTAINER_KIND,
    ENV_ALLOWED_HTTP_HOSTS,
    ENV_BUCKET,
    ENV_CODE_VERSION,
    ENV_DISPATCH_CONCURRENCY,
    ENV_ENQUEUE_HORIZON_SECONDS,
    ENV_FAIR_SHARE,
    ENV_HANDLER_MODULES,
    ENV_LOOKAHEAD_SECONDS,
    ENV_NOTIFY_TOPIC_ARNS,
    ENV_RETENTION_DAYS,
    ENV_SHARDS,
    ENV_STATE_MACHINE_ARN,
    ENV_TENANT_BURST,
    ENV_TENANT_MAX_RUNNING,
    ENV_TENANT_RUNS_PER_SECOND,
    ENV_TENANT_SLOTS,
    QUEUE_KINDS,
    TABLES,
)


class JobschedStack(cdk.Stack):
    """Everything one jobsched deployment needs, in one stack."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        code: lambda_.Code | None = None,
        **kwargs,
    ) -> None:
        """``code`` defaults to the bundled asset; tests of settings that do not touch it may pass
        inline code to skip bundling."""
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        destroy = config.removal_policy_destroy
        if code is None:
            code = code_asset()  # one asset, bundled once, shared by every function
            if bytecode_interpreter(LAMBDA_PYTHON_VERSION) is None:
                cdk.Annotations.of(self).add_warning_v2("jobsched:asset-without-bytecode", bytecode_warning())

        # encryption=cmk: one customer-managed key for every store (infra/encryption.py); None = AWS keys.
        self.key = stack_key(self, "Key", destroy=destroy) if config.encryption == "cmk" else None
        key = self.key

        self.tables = Tables(self, "Tables", destroy=destroy, key=key)
        self.storage = PayloadStore(
            self, "Payloads", retention_days=config.retention_days, destroy=destroy, key=key
        )
        self.queues = Queues(
            self,
            "Queues",
            consumer_timeout_seconds=function_spec(QUEUE_CONSUMER).timeout_seconds,
            dlq_consumer_timeout_seconds=function_spec(DLQ_CONSUMER).timeout_seconds,
            key=key,
        )
        # A chunked job's tasks go to the long queue, or to the container queue on the container pool.
        self.long_jobs = LongJobs(
            self,
            "LongJobs",
            long_queue=self.queues.queue("long"),
            container_queue=self.queues.queue(CONTAINER_KIND),
            config=config,
            key=key,
        )

        # Every function gets the whole name map (the settings object needs it); grants stay per function.
        environment = {
            **self.tables.environment(),
            **self.queues.environment(QUEUE_KINDS, dlqs=True),
            ENV_BUCKET: self.storage.bucket.bucket_name,
            ENV_STATE_MACHINE_ARN: self.long_jobs.state_machine.state_machine_arn,
            ENV_SHARDS: str(config.shards),
            ENV_LOOKAHEAD_SECONDS: str(config.lookahead_seconds),
            ENV_ENQUEUE_HORIZON_SECONDS: str(config.enqueue_horizon_seconds),
            ENV_RETENTION_DAYS: str(config.retention_days),
            ENV_ALLOWED_HTTP_HOSTS: config.allowed_http_hosts,
            ENV_NOTIFY_TOPIC_ARNS: ",".join(config.notify_topic_arns),
            ENV_HANDLER_MODULES: ",".join(config.handler_modules),
            ENV_TENANT_MAX_RUNNING: str(config.tenant_max_running),
            ENV_TENANT_RUNS_PER_SECOND: str(config.tenant_runs_per_second),
            ENV_TENANT_BURST: str(config.tenant_burst),
            # With a fair share, the slots one tenant may hold at the base ceilings, and the share
            # they follow the capacity function's ceilings by (decision 0057).
            **(
                {
                    ENV_TENANT_SLOTS: format_tenant_slots(config.tenant_slots()),
                    ENV_FAIR_SHARE: str(config.fair_share),
                }
                if config.tenant_slots()
                else {}
            ),
            ENV_DISPATCH_CONCURRENCY: str(config.dispatch_concurrency),
            # What each attempt records as the code that ran it (decision 0048): the asset's hash.
            ENV_CODE_VERSION: code_version_of(self, code),
        }
        shared = {
            "code": code,
            "config": config,
            "environment": environment,
            "tables": self.tables,
            "key": key,
        }
        self.dispatch = Dispatch(self, "Dispatch", queues=self.queues, **shared)
        self.workers = Workers(
            self,
            "Workers",
            queues=self.queues,
            payloads=self.storage,
            state_machine=self.long_jobs.state_machine,
            **shared,
        )
        # Runs over Lambda's 15 minutes, and jobs of the container pool: ECS Fargate tasks on the
        # container queue, logging into the worker's log group (infra/containers.py).
        self.containers = (
            ContainerPool(
                self,
                "ContainerPool",
                config=config,
                environment=environment,
                tables=self.tables,
                queues=self.queues,
                payloads=self.storage,
                state_machine=self.long_jobs.state_machine,
                log_group=self.workers.worker.log_group,
            )
            if config.container_pool
            else None
        )
        self.console_pool = (
            ConsoleUserPool(self, "Console", config=config) if config.console_user_pool else None
        )
        self.api = Api(
            self,
            "Api",
            console_pool=self.console_pool,
            queues=self.queues,
            payloads=self.storage,
            run_log_group=self.workers.worker.log_group.log_group_name,
            **shared,
        )

        # Pre-warming and scaling on age: the worker mappings' ceilings, once a minute (infra/capacity.py).
        self.capacity = (
            Capacity(
                self,
                "Capacity",
                mappings=self.workers.mappings,
                group=self.dispatch.group,
                dead_letter_queue=self.dispatch.schedule_dlq,
                container_service=self.containers.service if self.containers is not None else None,
                worker_alias=self.workers.worker_alias,
                **shared,
            )
            if config.capacity
            else None
        )
        functions = {
            "api": self.api.function,
            "dispatcher": self.dispatch.dispatcher,
            "worker": self.workers.worker,
            "worker_high": self.workers.high_worker,  # the same spec as worker, for the high queue
            "worker_long": self.workers.long_worker,  # the same spec as worker, for the long queue
            "dlq_consumer": self.workers.dlq_consumer,
            "sweeper": self.dispatch.sweeper,
        }
        self.observability = Observability(
            self,
            "Observability",
            config=config,
            key=key,
            watched=Watched(
                queues={kind: self.queues.queue(kind) for kind in QUEUE_KINDS},
                dlqs={
                    **{kind: self.queues.dlq(kind) for kind in QUEUE_KINDS},
                    "schedule": self.dispatch.schedule_dlq,
                },
                functions=functions,
                container_service=self.containers.service if self.containers is not None else None,
            ),
        )
        self.queries = SavedQueries(self, "Queries", functions=functions)
        apply_tags(self, config)
        self.functions = functions

        cdk.CfnOutput(self, "ApiUrl", value=self.api.url, description="Base URL of the HTTP API (SigV4)")
        cdk.CfnOutput(self, "ConsoleUrl", value=self.api.url + "ui", description="The operator console")
        if self.console_pool is not None:
            pool = self.console_pool
            cdk.CfnOutput(
                self,
                "ConsoleUserPoolId",
                value=pool.user_pool.user_pool_id,
                description="Cognito user pool of the console's users (custom:tenant names the tenant)",
            )
            cdk.CfnOutput(
                self,
                "ConsoleClientId",
                value=pool.client.user_pool_client_id,
                description="The console's app client (the API's JWT audience)",
            )
        cdk.CfnOutput(
            self, "DashboardUrl", value=self.observability.dashboard_url, description="CloudWatch dashboard"
        )
        cdk.CfnOutput(
            self, "AlertTopicArn", value=self.observability.topic.topic_arn, description="SNS alert topic"
        )
        cdk.CfnOutput(
            self, "PayloadBucket", value=self.storage.bucket.bucket_name, description="Payloads and outputs"
        )
        cdk.CfnOutput(
            self,
            "StateMachineArn",
            value=self.long_jobs.state_machine.state_machine_arn,
            description="Chunked-job state machine",
        )
        if self.containers is not None:
            cdk.CfnOutput(
                self,
                "ContainerCluster",
                value=self.containers.cluster.cluster_name,
                description="ECS cluster of the container pool",
            )
            cdk.CfnOutput(
                self,
                "ContainerService",
                value=self.containers.service.service_name,
                description="Fargate service of the container pool (scaled from 0 on its queue)",
            )
        self._acknowledge_function_findings()

    @property
    def availability_zones(self) -> list[str]:
        """The region's first two AZs as CloudFormation resolves them at deploy (``Fn::GetAZs``), in
        every synthesis: bound to an account, CDK would otherwise look them up at synth and write them
        to ``cdk.context.json`` (the container pool's VPC is the only user: infra/containers.py)."""
        return [cdk.Fn.select(index, cdk.Fn.get_azs()) for index in range(2)]

    def _acknowledge_function_findings(self) -> None:
        """cdk-nag findings that every function (and the container pool's task role) shares, each
        with its reason."""
        indexed = [self.tables.table(spec) for spec in TABLES if spec.indexes]
        logical_ids = [self.resolve(table.node.default_child.logical_id) for table in indexed]  # type: ignore[union-attr]
        task_roles = [self.containers.task_role] if self.containers is not None else []
        for role in task_roles:
            acknowledge_index_access(role, logical_ids)
            self._acknowledge_key_actions(role)
        capacity = [self.capacity.function] if self.capacity is not None else []
        for function in [*self.functions.values(), *capacity]:
            acknowledge_index_access(function.role, logical_ids)  # type: ignore[arg-type]
            acknowledge(
                function.role,
                "AwsSolutions-IAM5[Resource::*]",
                "X-Ray tracing (xray:PutTraceSegments, xray:PutTelemetryRecords) supports "
                "no resource-level permissions, so CDK grants it on Resource '*'; no action is a "
                "wildcard.",
            )
            self._acknowledge_key_actions(function.role)  # type: ignore[arg-type]

    def _acknowledge_key_actions(self, role: iam.IRole) -> None:
        if self.key is None:
            return
        for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*"):
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Action::{action}]",
                "CDK's DynamoDB grant_read_write_data adds the key actions a principal of a "
                "table encrypted with a customer-managed key may need (kms:Decrypt, "
                "kms:DescribeKey, kms:Encrypt, kms:ReEncrypt*, kms:GenerateDataKey*), on the "
                "stack's one key only; SQS and S3 grants name their key actions exactly.",
            )
