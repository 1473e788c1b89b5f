"""The worker pool and the DLQ consumer, with their SQS event source mappings.

Two worker functions run the same code and entry point (``functions.worker.handler``):

* ``WorkerHigh`` consumes the ``high`` queue only, with reserved concurrency
  (``high_reserved_concurrency``, default = ``max_concurrency["high"]``): those executions are set
  aside in the account for it, so no other function -- the shared worker flooded with ``low`` or
  ``default`` work, or anything else in the account -- can take them;
* ``Worker`` consumes ``default``, ``low`` and ``long``; it draws on the account's unreserved
  concurrency, and each of its mappings has its own ``MaximumConcurrency`` as a ceiling.

Each mapping reports partial batch failures. Both functions have the same grants, and share one log
group (a run's logs are in one place whichever queue it came from). The DLQ consumer drains the
dead-letter queues into failed runs. docs/decisions/0028-reserved-high-capacity-and-backpressure-by-age.md.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.config import StackConfig
from infra.functions import function_spec, grant_notify_publish, make_function
from infra.nag import acknowledge, rendered
from infra.queues import DLQ_CONSUMER, QUEUE_CONSUMER, Queues
from infra.storage import PayloadStore
from infra.tables import Tables
from jobsched.runtime.resources import IDEMPOTENCY_TABLE, LAMBDA_QUEUE_KINDS, LEASES_TABLE, RUNS_TABLE

#: The queues the high worker consumes; every other queue feeds the shared worker.
HIGH_KINDS = ("high",)
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
        # The high queue's own function: the same code and entry point, its own reserved concurrency
        # (0 = none) and its own mapping, writing to the worker's log group.
        reserved = config.high_reservation
        if reserved:
            # Lambda keeps 100 executions of the account unreserved: a deploy into an account whose
            # quota cannot spare the reservation fails late, in CloudFormation. Say so at synth.
            cdk.Annotations.of(self).add_warning_v2(
                "jobsched:reservedConcurrencyQuota",
                f"WorkerHigh reserves {reserved} concurrent executions (context setting "
                f"high_reserved_concurrency): the account's Lambda concurrency quota must be at least "
                f"{reserved + UNRESERVED_MINIMUM} plus its other reservations, or the deploy fails with "
                "'... decreases account's UnreservedConcurrentExecution below its minimum value'. "
                "New accounts may start at 10: deploy with -c high_reserved_concurrency=0 or raise the "
                "quota (Service Quotas > AWS Lambda > Concurrent executions). docs/deploy.md",
            )
        self.high_worker = make_function(
            self,
            function_spec(QUEUE_CONSUMER),
            code=code,
            config=config,
            environment=environment,
            key=key,
            construct_id="WorkerHigh",
            reserved_concurrency=reserved,
            log_group=self.worker.log_group,
        )
        self.consumers = {
            kind: self.high_worker if kind in HIGH_KINDS else self.worker for kind in LAMBDA_QUEUE_KINDS
        }
        for function in (self.worker, self.high_worker):
            self._grant(function, tables=tables, queues=queues, payloads=payloads, config=config)
            # Chunk tasks (task tokens) arrive on the long queue only, so only its consumer answers
            # them and stops executions (decision 0038: WorkerHigh never made those calls).
            chunks = self.consumers.get("long") is function
            self._grant_state_machine(function, state_machine, chunks=chunks)
        self.mappings: dict[str, sources.SqsEventSource] = {}
        for kind in LAMBDA_QUEUE_KINDS:
            source = sources.SqsEventSource(
                queues.queue(kind),
                batch_size=BATCH_SIZE.get(kind, DEFAULT_BATCH_SIZE),
                report_batch_item_failures=True,
                max_concurrency=config.max_concurrency[kind],
            )
            self.consumers[kind].add_event_source(source)  # grants consume, incl. ChangeMessageVisibility
            self.mappings[kind] = source

        self.dlq_consumer = make_function(
            self, function_spec(DLQ_CONSUMER), code=code, config=config, environment=environment, key=key
        )
        # Runs only: its poison dead letters are marked as owing a notification, the sweeper sends it.
        tables.table(RUNS_TABLE).grant_read_write_data(self.dlq_consumer)
        for kind in queues.kinds:
            self.dlq_consumer.add_event_source(
                sources.SqsEventSource(
                    queues.dlq(kind),
                    batch_size=DEFAULT_BATCH_SIZE,
                    report_batch_item_failures=True,
                    max_concurrency=DLQ_MAX_CONCURRENCY,
                )
            )

    @staticmethod
    def _grant(
        function: lambda_.Function,
        *,
        tables: Tables,
        queues: Queues,
        payloads: PayloadStore,
        config: StackConfig,
    ) -> None:
        """What a worker function (either of the two) may do, beyond consuming its own queues."""
        # Runs (claims, outcomes), Leases (chunk checkpoints, limits), Idempotency (handlers' effects).
        # Not Jobs: the worker reads the job's snapshot from the message, and a retry longer than the
        # SQS delay cap re-sends its own message with the rest of the delay.
        for spec in (RUNS_TABLE, LEASES_TABLE, IDEMPOTENCY_TABLE):
            tables.table(spec).grant_read_write_data(function)
        payloads.grant_objects(function, "s3:GetObject", "s3:PutObject")
        # Dead-letter notifications: the worker delivers its own (tenant defaults live in Leases).
        grant_notify_publish(function, config)
        for kind in queues.kinds:
            # Retries re-send the run with their backoff as DelaySeconds (a delay over SQS's 900 s cap is
            # carried by the message: jobsched/services/worker.py, step 2); a DAG node's end sends its
            # children to their priorities' queues; a freed limit slot makes a waiter's message visible
            # (ChangeMessageVisibility), whichever queue the waiter is in.
            queues.grant_send(kind, function)
            queues.queue(kind).grant(function, "sqs:ChangeMessageVisibility")

    def _grant_state_machine(
        self, function: lambda_.Function, state_machine: sfn.IStateMachine, *, chunks: bool
    ) -> None:
        """Start a chunked run's execution and read it (either worker: a chunked job may have any
        priority); with ``chunks`` (the long queue's consumer) also answer its task tokens and stop the
        execution of a cancelled run."""
        state_machine.grant_start_execution(function)
        if chunks:
            state_machine.grant_task_response(function)
            state_machine.grant_execution(function, "states:DescribeExecution", "states:StopExecution")
        else:
            state_machine.grant_execution(function, "states:DescribeExecution")
        machine_id = cdk.Stack.of(self).resolve(state_machine.node.default_child.logical_id)  # type: ignore[union-attr]
        execution_name = '{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"' + machine_id + '"}]}]}'
        partition, region, account = (
            rendered(self, pseudo) for pseudo in ("AWS::Partition", "AWS::Region", "AWS::AccountId")
        )
        acknowledge(
            function.role,  # type: ignore[arg-type]
            f"AwsSolutions-IAM5[Resource::arn:{partition}:states:{region}:{account}"
            f":execution:{execution_name}:*]",
            "Execution names are run ids, known only at run time, so DescribeExecution/StopExecution are "
            "granted on the executions of this one state machine ('execution:<machine>:*'); the actions "
            "are listed explicitly.",
        )
