"""The dispatcher and its per-shard ticks; the sweeper and its schedule.

EventBridge Scheduler invokes the dispatcher once a minute per shard (``{"shard": k, "shards": n}``:
the event names the count, so while a deployment changes it each tick follows its own schedule's
mapping of due partitions to shards, docs/decisions/0016-due-partitions.md): one schedule per shard in
one schedule group, each with a retry policy and a dead-letter queue. A tick older than
a minute is worthless (the next one is already due), so retries stop after a minute. The sweeper
runs on its own, slower schedule in the same group.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from constructs import Construct

from infra.config import StackConfig
from infra.encryption import SQS_PRODUCER_KEY_ACTIONS
from infra.functions import function_spec, grant_notify_publish, make_function
from infra.nag import acknowledge
from infra.queues import Queues, encrypted_queue
from infra.tables import Tables
from jobsched.runtime.resources import (
    BACKPRESSURE_PRIORITIES,
    ENV_BACKPRESSURE_AGE_PREFIX,
    ENV_BACKPRESSURE_DEPTH_PREFIX,
    JOBS_TABLE,
    LEASES_TABLE,
    RUNS_TABLE,
)

TICK_RETRY_ATTEMPTS = 2
TICK_MAX_EVENT_AGE_SECONDS = 60


def backpressure_environment(config: StackConfig) -> dict[str, str]:
    """The dispatcher's backpressure settings (``JOBSCHED_BACKPRESSURE_DEPTH_<P>``, ``..._AGE_<P>``)."""
    env: dict[str, str] = {}
    for priority in BACKPRESSURE_PRIORITIES:
        env[ENV_BACKPRESSURE_DEPTH_PREFIX + priority.upper()] = str(config.backpressure_depth[priority])
        env[ENV_BACKPRESSURE_AGE_PREFIX + priority.upper()] = str(config.backpressure_age_seconds[priority])
    return env


class Dispatch(Construct):
    """``dispatcher`` + ``sweeper`` functions, the schedule group, the tick and sweep schedules."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        config: StackConfig,
        environment: Mapping[str, str],
        tables: Tables,
        queues: Queues,
        key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dispatcher = make_function(
            self,
            function_spec("dispatcher"),
            code=code,
            config=config,
            key=key,
            environment={**environment, **backpressure_environment(config)},
        )
        # Leases: shard leases, and the queue ages the sweeper records (backpressure by age).
        for spec in (JOBS_TABLE, RUNS_TABLE, LEASES_TABLE):
            tables.table(spec).grant_read_write_data(self.dispatcher)
        for kind in queues.kinds:  # a run goes to its pool's queue: a priority's, long or container
            queues.grant_send(kind, self.dispatcher)
        for kind in BACKPRESSURE_PRIORITIES:  # backpressure reads their depth
            queues.queue(kind).grant(self.dispatcher, "sqs:GetQueueAttributes")
        grant_notify_publish(self.dispatcher, config)  # a tenant's 80 % budget warning (decision 0062)

        self.sweeper = make_function(
            self, function_spec("sweeper"), code=code, config=config, environment=environment, key=key
        )
        for spec in (JOBS_TABLE, RUNS_TABLE, LEASES_TABLE):
            tables.table(spec).grant_read_write_data(self.sweeper)
        for kind in queues.kinds:
            queues.grant_send(kind, self.sweeper)
        # A run is declared stranded only if its queue has no backlog; each sweep samples every run
        # queue's depth (decision 0064).
        for kind in queues.kinds:
            queues.queue(kind).grant(self.sweeper, "sqs:GetQueueAttributes")
        grant_notify_publish(self.sweeper, config)  # it delivers the dead-letter notifications still owed

        self.schedule_dlq = encrypted_queue(
            self, "ScheduleDlq", key=key, retention_period=cdk.Duration.days(14)
        )
        acknowledge(
            self.schedule_dlq,
            "AwsSolutions-SQS3",
            "This queue is itself the dead-letter queue of the EventBridge Scheduler "
            "targets; nothing consumes it automatically (an alarm fires when it is not empty).",
        )
        self.group = scheduler.ScheduleGroup(self, "Group")
        role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
            description="EventBridge Scheduler: invoke the dispatcher and the sweeper, dead-letter failures",
        )
        if key is not None:
            # The scheduler sends failed ticks to the DLQ under this role (CDK grants it sqs:SendMessage).
            key.grant(role, *SQS_PRODUCER_KEY_ACTIONS)
        retry = {
            "dead_letter_queue": self.schedule_dlq,
            "max_event_age": cdk.Duration.seconds(TICK_MAX_EVENT_AGE_SECONDS),
            "retry_attempts": TICK_RETRY_ATTEMPTS,
            "role": role,
        }
        for function in (self.dispatcher, self.sweeper):
            logical_id = cdk.Stack.of(self).resolve(function.node.default_child.logical_id)  # type: ignore[union-attr]
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>:*]",
                "The scheduler's invoke grant covers the function and its versions/aliases "
                "('<function ARN>:*') of this one function; the only action is lambda:InvokeFunction.",
            )
        self.tick_schedules = [
            scheduler.Schedule(
                self,
                f"Tick{shard}",
                description=f"dispatcher tick for shard {shard}",
                schedule=scheduler.ScheduleExpression.rate(cdk.Duration.minutes(1)),
                schedule_group=self.group,
                target=targets.LambdaInvoke(
                    self.dispatcher,
                    input=scheduler.ScheduleTargetInput.from_object(
                        {"shard": shard, "shards": config.shards}
                    ),
                    **retry,
                ),
            )
            for shard in range(config.shards)
        ]
        self.sweep_schedule = scheduler.Schedule(
            self,
            "Sweep",
            description="sweeper: re-send lost runs, reclaim expired leases",
            schedule=scheduler.ScheduleExpression.rate(cdk.Duration.minutes(config.sweeper_rate_minutes)),
            schedule_group=self.group,
            target=targets.LambdaInvoke(
                self.sweeper, input=scheduler.ScheduleTargetInput.from_object({}), **retry
            ),
        )
