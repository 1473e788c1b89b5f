"""The container pool: an ECS Fargate service running the worker loop on the ``container`` queue.

Runs longer than Lambda's 15 minutes (up to SQS's 12-hour visibility timeout) and jobs that ask for
the ``container`` pool go to the ``container`` queue, which no Lambda function consumes. The construct
``ContainerPool`` holds:

* ``Cluster``: an ECS cluster with Container Insights, and the FARGATE / FARGATE_SPOT capacity
  providers;
* ``TaskDef``: a Fargate task definition for arm64 (``container_cpu`` / ``container_memory``), one
  container running ``jobsched worker --pool container`` (jobsched/compose/container_worker.py) with
  the worker function's environment, its logs in the worker's log group (stream prefix
  ``container``: a run's logs are in one place whichever pool ran it), a stop timeout of
  :data:`STOP_TIMEOUT_SECONDS` (SIGTERM, then SIGKILL: the loop finishes its run or hands the lease
  back), a read-only root file system with a writable ``/tmp``;
* the image: by default ``ContainerImage.from_asset`` of the repository's ``Dockerfile`` (built and
  pushed by ``cdk deploy``, which then needs Docker; synthesis does not), or with context
  ``container_image`` a prebuilt image (``<account>.dkr.ecr.<region>.amazonaws.com/repo:tag`` is
  pulled from that ECR repository with a grant on it alone; any other registry must be public);
* ``Service``: a Fargate service with desired count 0, scaled by Application Auto Scaling between 0
  and ``container_max_tasks`` on the queue's metrics (:class:`Scaling`);
* the network: a VPC of its own with public subnets in 2 AZs and no NAT gateway (tasks get a public
  IP; their security group has no ingress and egress on 443 only), or the user's (``vpc_id`` +
  ``vpc_subnet_ids``: private subnets with their own NAT gateway or VPC endpoints; no public IP).

The task role may do for runs what the worker functions may (infra/workers.py: :func:`grant_runs`),
consume the container queue, and answer chunk tasks; the execution role only pulls the image and
writes the logs. docs/deploy.md#container-pool, docs/decisions/0051-container-pool-on-ecs-fargate.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.bundling import PROJECT_ROOT
from infra.config import StackConfig
from infra.nag import acknowledge
from infra.observability import waiting_age
from infra.queues import QUEUE_CONSUMER, Queues
from infra.storage import PayloadStore
from infra.tables import Tables
from infra.workers import grant_runs, grant_state_machine
from jobsched.runtime.observability import NAMESPACE
from jobsched.runtime.resources import CONTAINER_KIND, ENV_CONTAINER_CPU, ENV_CONTAINER_MEMORY_MB

#: What the container runs (the image's own CMD is the same; jobsched/local/iam/template.py finds the
#: task definition by it, and judges the loop's recorded calls, ``container_worker``, by its task role).
COMMAND = ("jobsched", "worker", "--pool", CONTAINER_KIND)
DOCKERFILE = "Dockerfile"
#: Seconds between SIGTERM and SIGKILL when a task is stopped (scale-in, deploy, Spot interruption:
#: Spot gives 2 minutes' notice, so a longer timeout would not be honoured there). Fargate's maximum.
STOP_TIMEOUT_SECONDS = 120
#: Subpackages of ``jobsched`` the image leaves out (``.dockerignore``): the Lambda asset's
#: development-only parts but those ``jobsched worker`` needs (the CLI, its API client and the local
#: configuration its parser reads). tests/infra/test_containers.py keeps .dockerignore in step.
IMAGE_DEV_ONLY = ("jobsched.bench", "jobsched.rehearsal", "jobsched.testing")

#: A prebuilt image in an ECR repository: pulled with a grant on that repository alone.
ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9._/-]+?)(?::(?P<tag>[\w.-]+)|@(?P<digest>sha256:[0-9a-f]{64}))$"
)

# Scaling (docs/deploy.md#container-pool): the steps a backlog of visible messages adds tasks by.
SCALE_OUT_STEPS = ((1, 1), (10, 3), (50, 10))  # (visible messages at least, tasks added)
#: Seconds the oldest message may wait, while messages are visible, before one more task is added.
SCALE_OUT_AGE_SECONDS = 120
#: Minutes the queue must hold no message, visible or in flight, before the service goes back to 0.
IDLE_MINUTES = 5
SCALING_COOLDOWN_SECONDS = 60
METRIC_PERIOD = cdk.Duration.minutes(1)  # SQS publishes its queue metrics every minute


def image_of(scope: Construct, config: StackConfig) -> ecs.ContainerImage:
    """The container image: ``container_image`` when set (an ECR URI pulled from that repository
    alone, any other a public registry's), else the repository's Dockerfile as an arm64 image asset."""
    uri = config.container_image
    if uri is None:
        return ecs.ContainerImage.from_asset(
            str(PROJECT_ROOT),
            file=DOCKERFILE,
            platform=ecr_assets.Platform.LINUX_ARM64,
            ignore_mode=cdk.IgnoreMode.DOCKER,
        )
    match = ECR_IMAGE.match(uri)
    if match is None:
        return ecs.ContainerImage.from_registry(uri)
    partition = "aws-cn" if ".amazonaws.com.cn/" in uri else "aws"
    repository = ecr.Repository.from_repository_attributes(
        scope,
        "ImageRepository",
        repository_arn=(
            f"arn:{partition}:ecr:{match['region']}:{match['account']}:repository/{match['repository']}"
        ),
        repository_name=match["repository"],
    )
    return ecs.ContainerImage.from_ecr_repository(repository, match["tag"] or match["digest"])


@dataclass(frozen=True)
class Network:
    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    public_ip: bool


def network_of(scope: Construct, config: StackConfig) -> Network:
    """The user's VPC and subnets (``vpc_id`` + ``vpc_subnet_ids``, no lookup at synth), or a VPC of
    the pool's own: public subnets in 2 AZs, no NAT gateway, no public IP on launch (the service
    assigns each task one)."""
    if config.vpc_id:
        vpc = ec2.Vpc.from_vpc_attributes(
            scope, "Vpc", vpc_id=config.vpc_id, availability_zones=cdk.Stack.of(scope).availability_zones
        )
        subnets = [
            ec2.Subnet.from_subnet_id(scope, f"Subnet{index}", subnet_id)
            for index, subnet_id in enumerate(config.vpc_subnet_ids)
        ]
        return Network(vpc, ec2.SubnetSelection(subnets=subnets), public_ip=False)
    vpc = ec2.Vpc(
        scope,
        "Vpc",
        max_azs=2,
        nat_gateways=0,
        # CDK's restriction of the default security group is a custom resource (a Lambda function of its
        # own); nothing uses the default group: the tasks have their own, with no ingress.
        restrict_default_security_group=False,
        subnet_configuration=[
            ec2.SubnetConfiguration(
                name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24, map_public_ip_on_launch=False
            )
        ],
    )
    acknowledge(
        vpc,
        "AwsSolutions-VPC7",
        "No flow logs on the container pool's VPC: it holds only the container tasks, whose security group "
        "admits no inbound traffic and lets out HTTPS only; flow logs would cost per GB ingested for traffic "
        "that is all calls to AWS APIs and webhook targets (docs/deploy.md#container-pool).",
    )
    return Network(vpc, ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC), public_ip=True)


class ContainerPool(Construct):
    """``Cluster``, ``TaskDef`` (with its task role), ``Service`` and its scaling, and the network."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        environment: Mapping[str, str],
        tables: Tables,
        queues: Queues,
        payloads: PayloadStore,
        state_machine: sfn.IStateMachine,
        log_group: logs.ILogGroup,
    ) -> None:
        super().__init__(scope, construct_id)
        queue = queues.queue(CONTAINER_KIND)
        self.network = network_of(self, config)
        self.cluster = ecs.Cluster(
            self,
            "Cluster",
            vpc=self.network.vpc,
            container_insights_v2=ecs.ContainerInsights.ENABLED,
            enable_fargate_capacity_providers=True,
        )

        self.task_role = iam.Role(
            self,
            "TaskRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="jobsched container_worker tasks: only what the worker loop uses, per resource",
        )
        grant_runs(self.task_role, tables=tables, queues=queues, payloads=payloads, config=config)
        queue.grant_consume_messages(self.task_role)  # Receive, Delete, ChangeMessageVisibility, ...
        grant_state_machine(self.task_role, self.task_role, state_machine, chunks=True)

        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "TaskDef",
            cpu=config.container_cpu,
            memory_limit_mib=config.container_memory,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
            task_role=self.task_role,
        )
        self.task_definition.add_volume(name="tmp")
        self.container = self.task_definition.add_container(
            "Worker",
            image=image_of(self, config),
            command=list(COMMAND),
            environment={
                # The worker's: its run metrics (RunDuration, RunsDeadLettered, ...) are the worker
                # functions', so the dashboard and the alarms on them count the container pool's runs.
                "POWERTOOLS_SERVICE_NAME": QUEUE_CONSUMER,
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": "INFO",
                # the task's size, by which the loop prices its runs' Fargate time (usage)
                ENV_CONTAINER_CPU: str(config.container_cpu),
                ENV_CONTAINER_MEMORY_MB: str(config.container_memory),
                **environment,
            },
            logging=ecs.LogDrivers.aws_logs(stream_prefix="container", log_group=log_group),
            stop_timeout=cdk.Duration.seconds(STOP_TIMEOUT_SECONDS),
            readonly_root_filesystem=True,
        )
        self.container.add_mount_points(
            ecs.MountPoint(container_path="/tmp", source_volume="tmp", read_only=False)
        )
        execution_role = self.task_definition.obtain_execution_role()
        acknowledge(
            execution_role,
            "AwsSolutions-IAM5[Resource::*]",
            "ECS pulls the image with the execution role: ecr:GetAuthorizationToken supports no "
            "resource-level permissions, so it is granted on Resource '*'; the image pull itself "
            "(ecr:BatchGetImage, ecr:GetDownloadUrlForLayer, ...) is granted on the image's one repository.",
        )
        acknowledge(
            self.task_definition,
            "AwsSolutions-ECS2",
            "The environment holds the names of the deployment's resources (tables, queues, bucket, state "
            "machine) and its settings, the same the worker function gets; no secret is in it.",
        )

        self.security_group = ec2.SecurityGroup(
            self,
            "TaskSecurityGroup",
            vpc=self.network.vpc,
            description="jobsched container tasks: no inbound traffic, outbound HTTPS only",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "AWS APIs and webhook targets over HTTPS"
        )
        provider = "FARGATE_SPOT" if config.container_spot else "FARGATE"
        self.service = ecs.FargateService(
            self,
            "Service",
            cluster=self.cluster,
            task_definition=self.task_definition,
            desired_count=0,
            assign_public_ip=self.network.public_ip,
            vpc_subnets=self.network.subnets,
            security_groups=[self.security_group],
            capacity_provider_strategies=[ecs.CapacityProviderStrategy(capacity_provider=provider, weight=1)],
            platform_version=ecs.FargatePlatformVersion.LATEST,
            # A deploy replaces tasks as scale-in does: each old one finishes or hands its run back.
            min_healthy_percent=0,
            max_healthy_percent=100,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
        )
        self.scaling = Scaling(self, "Scaling", service=self.service, queue=queue, config=config)


class Scaling(Construct):
    """The service's desired count, from 0 to ``container_max_tasks``, on the container queue's metrics:

    * ``ScaleOutOnDepth``: visible messages at least 1 / 10 / 50 (the minute's maximum) add 1 / 3 / 10
      tasks, again every minute while they stay;
    * ``ScaleOutOnAge``: while messages are visible, the oldest message older than
      :data:`SCALE_OUT_AGE_SECONDS` adds 1 task (work waits although tasks run: they are busy);
      the age alone would count a run in flight for hours;
    * ``ScaleInWhenIdle``: no message visible or in flight (visible + not visible = 0) for
      :data:`IDLE_MINUTES` minutes sets the count to 0; a task running a run is protected from
      scale-in (the loop sets ECS task scale-in protection while it holds a run).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        service: ecs.FargateService,
        queue: sqs.IQueue,
        config: StackConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        self.target = service.auto_scale_task_count(min_capacity=0, max_capacity=config.container_max_tasks)
        visible = queue.metric_approximate_number_of_messages_visible(
            period=METRIC_PERIOD, statistic="Maximum"
        )
        in_flight = queue.metric_approximate_number_of_messages_not_visible(
            period=METRIC_PERIOD, statistic="Maximum"
        )
        cooldown = cdk.Duration.seconds(SCALING_COOLDOWN_SECONDS)
        first = SCALE_OUT_STEPS[0][0]
        bounds = [at - first for at, _ in SCALE_OUT_STEPS[1:]] + [None]
        self._policy(
            "ScaleOutOnDepth",
            "DepthAlarm",
            visible,
            threshold=first,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            periods=1,
            cooldown=cooldown,
            steps=[
                {"adjustment": tasks, "lower_bound": at - first, "upper_bound": upper}
                for (at, tasks), upper in zip(SCALE_OUT_STEPS, bounds, strict=True)
            ],
            description="container queue: runs wait (visible messages): add container tasks",
        )
        self._policy(
            "ScaleOutOnAge",
            "AgeAlarm",
            waiting_age(queue),
            threshold=SCALE_OUT_AGE_SECONDS,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            periods=1,
            cooldown=cdk.Duration.seconds(SCALE_OUT_AGE_SECONDS),
            steps=[{"adjustment": 1, "lower_bound": 0}],
            description="container queue: its oldest waiting run waits although tasks run: add one",
        )
        backlog = cloudwatch.MathExpression(
            expression="visible + inflight",
            using_metrics={"visible": visible, "inflight": in_flight},
            period=METRIC_PERIOD,
            label="messages visible or in flight",
        )
        self._policy(
            "ScaleInWhenIdle",
            "IdleAlarm",
            backlog,
            threshold=0,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
            periods=IDLE_MINUTES,
            cooldown=cooldown,
            steps=[{"adjustment": 0, "upper_bound": 0}],
            exact=True,
            description="container queue: no message visible or in flight: scale the tasks to 0",
            # SQS stops publishing a queue's metrics after 6 hours without activity: that is idle too.
            missing=cloudwatch.TreatMissingData.BREACHING,
        )

    def _policy(
        self,
        policy_id: str,
        alarm_id: str,
        metric: cloudwatch.IMetric,
        *,
        threshold: float,
        comparison: cloudwatch.ComparisonOperator,
        periods: int,
        cooldown: cdk.Duration,
        steps: list[dict[str, Any]],
        description: str,
        exact: bool = False,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> appscaling.StepScalingAction:
        """A step scaling policy on the service's count (``exact``: set it, else change it by the
        steps' adjustments) and the one alarm that drives it (``periods`` minutes out of as many)."""
        action = appscaling.StepScalingAction(
            self,
            policy_id,
            scaling_target=self.target,
            adjustment_type=appscaling.AdjustmentType.EXACT_CAPACITY
            if exact
            else appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
            cooldown=cooldown,
        )
        for step in steps:
            action.add_adjustment(**step)
        alarm = cloudwatch.Alarm(
            self,
            alarm_id,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            treat_missing_data=missing,
            alarm_description=description,
        )
        alarm.add_alarm_action(cloudwatch_actions.ApplicationScalingAction(action))
        return action
