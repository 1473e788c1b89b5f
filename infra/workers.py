"""The worker pool and the DLQ consumer, with their SQS event source mappings.

The worker consumes every run queue; each mapping has its own ``MaximumConcurrency`` and reports
partial batch failures. ``MaximumConcurrency`` is a ceiling, not a reservation: it caps how many
concurrent invocations of the one worker function that queue's mapping may start, but the queues share
that function and the account's unreserved concurrency, so a flood of ``low`` work can still use the
concurrency ``high`` would need (up to ``low``'s own ceiling). The DLQ consumer drains the dead-letter
queues into failed runs.
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
from infra.nag import acknowledge
from infra.queues import DLQ_CONSUMER, QUEUE_CONSUMER, Queues
from infra.storage import PayloadStore
from infra.tables import Tables
from jobsched.runtime.resources import IDEMPOTENCY_TABLE, LEASES_TABLE, RUNS_TABLE

BATCH_SIZE = {"long": 1}  # a chunk may run for minutes: one per invocation
DEFAULT_BATCH_SIZE = 10
DLQ_MAX_CONCURRENCY = 2  # the minimum Lambda accepts; poison messages are rare


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
        # Runs (claims, outcomes), Leases (chunk checkpoints), Idempotency (handlers' effects). Not Jobs:
        # the worker reads the job's snapshot from the message, and a retry longer than the SQS delay
        # cap re-sends its own message with the rest of the delay.
        for spec in (RUNS_TABLE, LEASES_TABLE, IDEMPOTENCY_TABLE):
            tables.table(spec).grant_read_write_data(self.worker)
        payloads.grant_objects(self.worker, "s3:GetObject", "s3:PutObject")
        # Dead-letter notifications: the worker delivers its own (tenant defaults live in Leases).
        grant_notify_publish(self.worker, config)
        state_machine.grant_task_response(self.worker)
        state_machine.grant_start_execution(self.worker)
        # Chunked runs: read an execution's result, stop the execution of a cancelled run.
        state_machine.grant_execution(self.worker, "states:DescribeExecution", "states:StopExecution")
        machine_id = cdk.Stack.of(self).resolve(state_machine.node.default_child.logical_id)  # type: ignore[union-attr]
        execution_name = '{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"' + machine_id + '"}]}]}'
        acknowledge(
            self.worker.role,  # type: ignore[arg-type]
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>"
            f":execution:{execution_name}:*]",
            "Execution names are run ids, known only at run time, so DescribeExecution/StopExecution are "
            "granted on the executions of this one state machine ('execution:<machine>:*'); the actions "
            "are listed explicitly.",
        )
        self.mappings: dict[str, sources.SqsEventSource] = {}
        for kind in queues.kinds:
            queue = queues.queue(kind)
            # Retries re-send the run with their backoff as DelaySeconds. A delay over SQS's 900 s cap
            # is carried by the message itself: a delivery that arrives before its due instant re-sends
            # itself with the rest of the delay (jobsched/services/worker.py, step 2).
            queues.grant_send(kind, self.worker)
            source = sources.SqsEventSource(
                queue,
                batch_size=BATCH_SIZE.get(kind, DEFAULT_BATCH_SIZE),
                report_batch_item_failures=True,
                max_concurrency=config.max_concurrency[kind],
            )
            self.worker.add_event_source(source)  # grants consume, incl. ChangeMessageVisibility
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
