"""The worker pool and the DLQ consumer, with their SQS event source mappings.

Three worker functions run the same code and entry point (``functions.worker.handler``):

* ``WorkerHigh`` consumes the ``high`` queue only, with reserved concurrency
  (``high_reserved_concurrency``, default = ``max_concurrency["high"]``): those executions are set
  aside in the account for it, so no other function -- the shared worker flooded with ``low`` or
  ``default`` work, or anything else in the account -- can take them;
* ``WorkerLong`` consumes the ``long`` queue only (chunks of chunked jobs, and jobs of the ``long``
  pool), one message per invocation, with reserved concurrency (``long_reserved_concurrency``, default
  = ``max_concurrency["long"]``): long work never takes capacity from short work, nor the reverse. It
  alone answers the chunk tasks' tokens;
* ``Worker`` consumes ``default`` and ``low``; it draws on the account's unreserved concurrency, and
  each of its mappings has its own ``MaximumConcurrency`` as a ceiling. With
  ``capacity_max_provisioned`` its current version is published and the alias ``live``
  (:data:`~jobsched.runtime.resources.WORKER_ALIAS`) points at it: the two mappings invoke the alias,
  on which the capacity function sets provisioned concurrency ahead of a forecast peak (decision 0055).

Each mapping reports partial batch failures. The three functions have the same grants for runs (only
WorkerLong's state machine grants differ), and share one log group (a run's logs are in one place
whichever queue it came from). The ``container`` queue has no function: the container pool's tasks
consume it (infra/containers.py). The DLQ consumer drains every dead-letter queue into failed runs.
docs/decisions/0028-reserved-high-capacity-and-backpressure-by-age.md, 0051-container-pool-on-ecs-fargate.md.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import PROVISIONED_KINDS, StackConfig
from infra.functions import function_spec, grant_notify_publish, make_function
from infra.nag import acknowledge, rendered
from infra.queues import DLQ_CONSUMER, QUEUE_CONSUMER, Queues
from infra.storage import PayloadStore
from infra.tables import Tables
from jobsched.runtime.resources import (
    IDEMPOTENCY_TABLE,
    JOBS_TABLE,
    LAMBDA_QUEUE_KINDS,
    LEASES_TABLE,
    RUNS_TABLE,
    WORKER_ALIAS,
)

#: The queues the high worker and the long worker consume; the other Lambda queues feed the shared worker.
HIGH_KINDS = ("high",)
LONG_KINDS = ("long",)
BATCH_SIZE = {"long": 1}  # a chunk may run for minutes: one per invocation
DEFAULT_BATCH_SIZE = 10
DLQ_MAX_CONCURRENCY = 2
#: The concurrent executions Lambda keeps unreserved in every account (reservations cannot take them).
UNRESERVED_MINIMUM = 100  # the minimum Lambda accepts; poison messages are rare


class Workers(Construct):
    """``worker`` and ``dlq_consumer`` functions, their grants and event source mappings."""

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
        payloads: PayloadStore,
        state_machine: sfn.IStateMachine,
        key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.worker = make_function(
            self, function_spec(QUEUE_CONSUMER), code=code, config=config, environment=environment, key=key
        )
        # The high and long queues' own functions: the same code and entry point, each with its own
        # reserved concurrency (0 = none) and mapping, writing to the worker's log group.
        self._warn_about_the_quota(config)
        self.high_worker, self.long_worker = (
            make_function(
                self,
                function_spec(QUEUE_CONSUMER),
                code=code,
                config=config,
                environment=environment,
                key=key,
                construct_id=construct_id,
                reserved_concurrency=reserved,
                log_group=self.worker.log_group,
            )
            for construct_id, reserved in (
                ("WorkerHigh", config.high_reservation),
                ("WorkerLong", config.long_reservation),
            )
        )
        self.consumers = {kind: self.worker for kind in LAMBDA_QUEUE_KINDS}
        self.consumers.update({kind: self.high_worker for kind in HIGH_KINDS})
        self.consumers.update({kind: self.long_worker for kind in LONG_KINDS})
        for function in (self.worker, self.high_worker, self.long_worker):
            grant_runs(function, tables=tables, queues=queues, payloads=payloads, config=config)
            # Chunk tasks (task tokens) arrive on the long queue only, so only its consumer answers
            # them and stops executions (decision 0038: the other workers never made those calls).
            chunks = function is self.long_worker
            grant_state_machine(function, function.role, state_machine, chunks=chunks)  # type: ignore[arg-type]
        # Provisioned concurrency serves only invocations of a version or alias: with a cap, the
        # default and low mappings invoke the alias of the current version (one version kept).
        self.worker_alias: lambda_.Alias | None = None
        if config.capacity_max_provisioned:
            version = self.worker.current_version
            version.apply_removal_policy(cdk.RemovalPolicy.DESTROY)
            self.worker_alias = lambda_.Alias(self, "WorkerLive", alias_name=WORKER_ALIAS, version=version)
        self.mappings: dict[str, sources.SqsEventSource] = {}
        for kind in LAMBDA_QUEUE_KINDS:
            source = sources.SqsEventSource(
                queues.queue(kind),
                batch_size=BATCH_SIZE.get(kind, DEFAULT_BATCH_SIZE),
                report_batch_item_failures=True,
                # with the fair share's head-room (decision 0057): one tenant holds max_concurrency at most
                max_concurrency=config.mapping_ceiling(kind),
            )
            invoked = self.worker_alias if self.worker_alias and kind in PROVISIONED_KINDS else None
            # grants consume (incl. ChangeMessageVisibility) to the function's role, alias or not
            (invoked or self.consumers[kind]).add_event_source(source)
            self.mappings[kind] = source

        self.dlq_consumer = make_function(
            self, function_spec(DLQ_CONSUMER), code=code, config=config, environment=environment, key=key
        )
        # Runs only: its poison dead letters are marked as owing a notification, the sweeper sends it.
        tables.table(RUNS_TABLE).grant_read_write_data(self.dlq_consumer)
        # Its usage items (decision 0059 amended): one UpdateItem ADD per (tenant, day) per invocation.
        leases = tables.table(LEASES_TABLE)
        leases.grant(self.dlq_consumer, "dynamodb:UpdateItem")
        if leases.encryption_key is not None:
            leases.encryption_key.grant_encrypt(self.dlq_consumer)
        for kind in queues.kinds:
            self.dlq_consumer.add_event_source(
                sources.SqsEventSource(
                    queues.dlq(kind),
                    batch_size=DEFAULT_BATCH_SIZE,
                    report_batch_item_failures=True,
                    max_concurrency=DLQ_MAX_CONCURRENCY,
                )
            )

    def _warn_about_the_quota(self, config: StackConfig) -> None:
        """Lambda keeps 100 executions of the account unreserved: a deploy into an account whose quota
        cannot spare the reservations fails late, in CloudFormation. Say so at synth, once per
        reserving function, with the quota the two reservations need together."""
        reservations = {
            "WorkerHigh": (config.high_reservation, "high_reserved_concurrency"),
            "WorkerLong": (config.long_reservation, "long_reserved_concurrency"),
        }
        total = sum(reserved for reserved, _ in reservations.values())
        if config.capacity_max_provisioned:
            cdk.Annotations.of(self).add_warning_v2(
                "jobsched:provisionedConcurrencyQuota",
                f"The capacity function may provision up to {config.capacity_max_provisioned} instances of "
                "the Worker's alias (context setting capacity_max_provisioned): they are taken from the "
                "account's unreserved concurrency, which Lambda keeps at 100 at least, so a raise beyond "
                f"the account's Lambda concurrency quota minus {total + UNRESERVED_MINIMUM} (the workers' "
                "reservations and Lambda's unreserved minimum) and its other reservations and provisioned "
                "concurrency is refused by Lambda (the function's tick then logs it or fails: "
                "docs/scaling.md)",
            )
        for function, (reserved, setting) in reservations.items():
            if not reserved:
                continue
            cdk.Annotations.of(self).add_warning_v2(
                f"jobsched:reservedConcurrencyQuota:{function}",
                f"{function} reserves {reserved} concurrent executions (context setting {setting}): the "
                f"account's Lambda concurrency quota must be at least {total + UNRESERVED_MINIMUM} (the "
                f"workers' reservations, {total}, plus Lambda's unreserved {UNRESERVED_MINIMUM}) plus its "
                "other reservations, or the deploy fails with '... decreases account's "
                "UnreservedConcurrentExecution below its minimum value'. New accounts may start at 10: "
                f"deploy with -c {setting}=0 or raise the quota (Service Quotas > AWS Lambda > Concurrent "
                "executions). docs/deploy.md",
            )


def grant_runs(
    grantee: iam.IGrantable,
    *,
    tables: Tables,
    queues: Queues,
    payloads: PayloadStore,
    config: StackConfig,
) -> None:
    """What a worker (any of the three functions, or the container pool's task role) may do for runs,
    beyond consuming its own queues."""
    # Runs (claims, outcomes), Leases (chunk checkpoints, limits), Idempotency (handlers' effects).
    # Jobs only to read a job and move its cursor back: the worker reads the job's snapshot from the
    # message, but a run queued ahead that it records skipped for its tenant's budget rewinds the
    # job to that occurrence (decision 0062; a large payload is a body item read in a batch).
    for spec in (RUNS_TABLE, LEASES_TABLE, IDEMPOTENCY_TABLE):
        tables.table(spec).grant_read_write_data(grantee)
    # On the table alone: Table.grant would add its indexes, which a job read never touches (the
    # table's key is the CMK the other tables' grants already give).
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
        resource_arns=[tables.table(JOBS_TABLE).table_arn],
    )
    payloads.grant_objects(grantee, "s3:GetObject", "s3:PutObject")
    # Dead-letter notifications: the worker delivers its own (tenant defaults live in Leases).
    grant_notify_publish(grantee, config)
    for kind in queues.kinds:
        # Retries re-send the run with their backoff as DelaySeconds (a delay over SQS's 900 s cap is
        # carried by the message: jobsched/services/worker.py, step 2); a DAG node's end sends its
        # children to their priorities' queues; a freed limit slot makes a waiter's message visible
        # (ChangeMessageVisibility), whichever queue the waiter is in.
        queues.grant_send(kind, grantee)
        queues.queue(kind).grant(grantee, "sqs:ChangeMessageVisibility")


def grant_state_machine(
    grantee: iam.IGrantable, role: iam.IRole, state_machine: sfn.IStateMachine, *, chunks: bool
) -> None:
    """Start a chunked run's execution and read it (any worker: a chunked job may have any priority);
    with ``chunks`` (the consumers of chunk tasks: WorkerLong, and the container pool's tasks) also
    answer its task tokens and stop the execution of a cancelled run. ``role`` carries the cdk-nag
    acknowledgement of the executions' wildcard."""
    state_machine.grant_start_execution(grantee)
    if chunks:
        state_machine.grant_task_response(grantee)
        state_machine.grant_execution(grantee, "states:DescribeExecution", "states:StopExecution")
    else:
        state_machine.grant_execution(grantee, "states:DescribeExecution")
    machine_id = cdk.Stack.of(role).resolve(state_machine.node.default_child.logical_id)  # type: ignore[union-attr]
    execution_name = '{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"' + machine_id + '"}]}]}'
    partition, region, account = (
        rendered(role, pseudo) for pseudo in ("AWS::Partition", "AWS::Region", "AWS::AccountId")
    )
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::arn:{partition}:states:{region}:{account}"
        f":execution:{execution_name}:*]",
        "Execution names are run ids, known only at run time, so DescribeExecution/StopExecution are "
        "granted on the executions of this one state machine ('execution:<machine>:*'); the actions "
        "are listed explicitly.",
    )
