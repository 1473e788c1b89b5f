"""The dashboard's rows per pool, the skipped-by-reason widget, and each alarm's runbook section.

Each pool (``lambda``, ``long``, ``container``: :data:`jobsched.runtime.resources.POOLS`) has a row:
start lag p50/p99 and run duration p50/p99 (the worker's ``ScheduleLag<Pool>``, ``RunDuration<Pool>``),
success rate in % (metric math over ``RunsSucceeded<Pool>`` and ``RunsFailed<Pool>``), retries and dead
letters (``RunsRetried<Pool>``, ``RunsDeadLettered<Pool>``), utilisation (concurrent executions of the
pool's functions, or the container service's running tasks, over the pool's ceiling) and the forecast
against capacity (``ForecastConcurrency<Pool>`` and ``PoolCapacity<Pool>``, whichever function emits
them). Every pool figure is the worker's (``service`` = ``worker``: the three worker functions and the
container tasks share it, jobsched/compose/container_worker.py), so percentiles and alarms read one
concrete metric. docs/operations.md, "The dashboard"; docs/decisions/0056.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_lambda as lambda_

from infra.config import StackConfig
from infra.queues import QUEUE_CONSUMER
from jobsched.core.budgets import SKIP_REASON_BUDGET
from jobsched.runtime import observability as obs
from jobsched.runtime.resources import CONTAINER_KIND, PRIORITIES

MINUTE = cdk.Duration.minutes(1)
#: The functions of each Lambda pool, by their key in the stack's ``functions`` (infra/stack.py).
POOL_FUNCTIONS = {"lambda": ("worker_high", "worker"), "long": ("worker_long",), CONTAINER_KIND: ()}

#: The page of docs/ the alarms link to, and each alarm's section there: the GitHub anchor of its
#: heading, by the alarm's full name or else its name up to the first ``-`` (tests/infra checks that
#: every alarm has one and that it names a heading of docs/operations.md).
RUNBOOK_PAGE = "operations.md"
RUNBOOK = {
    "DlqNotEmpty-schedule": "dlqnotempty-schedule",
    "DlqNotEmpty": "dlqnotempty-queue-high-default-low-long-container",
    "OldestRun": "oldestrun-priority-oldestmessage-long-and-oldestmessage-container",
    "OldestMessage": "oldestrun-priority-oldestmessage-long-and-oldestmessage-container",
    "ScheduleLagP99": "schedulelagp99",
    "RunsStranded": "runsstranded",
    "RunsMissedDeadline": "runsmisseddeadline",
    "DeadLetters": "deadletters",
    "ErrorRate": "errorrate-function",
    "SuccessRate": "successrate-pool",
    "StartLagP99": "startlagp99-pool",
}


def runbook_anchor(alarm_name: str) -> str | None:
    """The anchor of the section of docs/operations.md about ``alarm_name`` (None: it has none)."""
    return RUNBOOK.get(alarm_name) or RUNBOOK.get(alarm_name.split("-", 1)[0])


def pool_ceilings(config: StackConfig) -> dict[str, int]:
    """Each pool's ceiling: the ``MaximumConcurrency`` of its queues' event source mappings (the
    ``lambda`` pool: high, default and low; ``long``), the container service's ``container_max_tasks``."""
    return {
        "lambda": sum(config.max_concurrency[p] for p in PRIORITIES),
        "long": config.max_concurrency["long"],
        CONTAINER_KIND: config.container_max_tasks,
    }


def app_metric(name: str, statistic: str, service: str) -> cw.Metric:
    """A jobsched application metric (Powertools EMF) of one function, at one-minute resolution."""
    return cw.Metric(
        namespace=obs.NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=MINUTE,
    )


def worker_metric(name: str, statistic: str, period: cdk.Duration = MINUTE) -> cw.Metric:
    """A worker metric (``service`` = ``worker``: every pool's workers) in namespace ``jobsched``."""
    return app_metric(name, statistic, QUEUE_CONSUMER).with_(period=period)


def any_service(name: str, label: str) -> cw.MathExpression:
    """The per-minute maximum of ``name`` over whichever functions emit it (a SEARCH expression)."""
    return cw.MathExpression(
        expression=f"MAX(SEARCH('{{{obs.NAMESPACE},service}} MetricName=\"{name}\"', 'Maximum', 60))",
        label=label,
        period=MINUTE,
    )


@dataclass(frozen=True)
class PoolRow:
    """The metrics, widgets and alarm sources of one pool."""

    pool: str

    @property
    def functions(self) -> tuple[str, ...]:
        return POOL_FUNCTIONS[self.pool]

    def metric(self, name: str, statistic: str, period: cdk.Duration = MINUTE) -> cw.Metric:
        """The pool's own figure of ``name`` (``pool_metric``), e.g. ``ScheduleLagLambda`` p99."""
        return worker_metric(obs.pool_metric(name, self.pool), statistic, period).with_(
            label=f"{self.pool} {statistic}"
        )

    def success_rate(self, period: cdk.Duration = MINUTE) -> cw.MathExpression:
        """Attempts that succeeded, in % of the attempts that ended (succeeded + failed) in the period;
        no data point in a period without any (the alarm treats that as not breaching)."""
        return cw.MathExpression(
            expression="IF(FILL(ok, 0) + FILL(failed, 0) > 0, "
            "100 * FILL(ok, 0) / (FILL(ok, 0) + FILL(failed, 0)))",
            using_metrics={
                "ok": self.metric(obs.RUNS_SUCCEEDED, "Sum", period),
                "failed": self.metric(obs.RUNS_FAILED, "Sum", period),
            },
            label=f"{self.pool} success rate (%)",
            period=period,
        )

    def lambda_busy(self, functions: Sequence[lambda_.IFunction]) -> dict[str, cw.IMetric]:
        """The pool's concurrent executions: the sum of its functions' ``ConcurrentExecutions``."""
        return {
            f"c{i}": f.metric("ConcurrentExecutions", period=MINUTE, statistic="Maximum")
            for i, f in enumerate(functions)
        }

    def container_busy(self, service: ecs.FargateService | None) -> dict[str, cw.IMetric]:
        """The container service's running tasks (Container Insights' ``RunningTaskCount``); none
        without the pool (``container_pool=false``)."""
        if service is None:
            return {}
        return {
            "c0": cw.Metric(
                namespace="ECS/ContainerInsights",
                metric_name="RunningTaskCount",
                dimensions_map={
                    "ClusterName": service.cluster.cluster_name,
                    "ServiceName": service.service_name,
                },
                statistic="Maximum",
                period=MINUTE,
            )
        }

    def utilisation(self, busy: dict[str, cw.IMetric], ceiling: int) -> cw.MathExpression:
        """Concurrent executions (or running tasks) in % of the pool's ceiling."""
        total = " + ".join(f"FILL({key}, 0)" for key in busy)
        return cw.MathExpression(
            expression=f"100 * ({total}) / {ceiling}",
            using_metrics=busy,
            label=f"{self.pool} utilisation (% of {ceiling})",
            period=MINUTE,
        )

    def widgets(self, busy: dict[str, cw.IMetric], ceiling: int) -> list[cw.IWidget]:
        """The row: six widgets of width 4."""
        pool = self.pool
        return [
            cw.GraphWidget(
                title=f"{pool}: start lag (s)",
                left=[self.metric(obs.SCHEDULE_LAG, stat) for stat in ("p50", "p99")],
                width=4,
            ),
            cw.GraphWidget(
                title=f"{pool}: run duration (s)",
                left=[self.metric(obs.RUN_DURATION, stat) for stat in ("p50", "p99")],
                width=4,
            ),
            cw.GraphWidget(
                title=f"{pool}: success rate (%)",
                left=[self.success_rate()],
                left_y_axis=cw.YAxisProps(min=0, max=100),
                width=4,
            ),
            cw.GraphWidget(
                title=f"{pool}: retries and dead letters",
                left=[
                    self.metric(obs.RUNS_RETRIED, "Sum").with_(label=f"{pool} retried"),
                    self.metric(obs.RUNS_DEAD_LETTERED, "Sum").with_(label=f"{pool} dead-lettered"),
                ],
                width=4,
            ),
            cw.GraphWidget(
                title=f"{pool}: utilisation (% of ceiling {ceiling})",
                left=[self.utilisation(busy, ceiling)],
                left_y_axis=cw.YAxisProps(min=0),
                width=4,
            )
            if busy
            else cw.TextWidget(
                markdown=f"**{pool}: utilisation**\n\nNo container pool in this deployment "
                "(`container_pool=false`): its runs wait in the container queue.",
                width=4,
                height=6,
            ),
            cw.GraphWidget(
                title=f"{pool}: forecast against capacity",
                left=[
                    any_service(obs.pool_metric(obs.FORECAST_CONCURRENCY, pool), f"{pool} forecast"),
                    any_service(obs.pool_metric(obs.POOL_CAPACITY, pool), f"{pool} capacity"),
                ],
                left_annotations=[cw.HorizontalAnnotation(value=ceiling, label="configured ceiling")],
                width=4,
            ),
        ]


def pool_rows(pool: str) -> PoolRow:
    return PoolRow(pool)


def skipped_by_reason() -> cw.GraphWidget:
    """Runs recorded skipped per minute, one line per reason (the dispatcher's ``RunsSkipped<Reason>``),
    and the workers' ``RunsSkippedBudget`` (runs queued ahead of a tenant that reached its monthly
    budget before they started: decision 0062)."""
    return cw.GraphWidget(
        title="Runs skipped by reason (per minute)",
        left=[
            *(
                app_metric(obs.skipped_metric(reason), "Sum", "dispatcher").with_(label=reason)
                for reason in obs.SKIP_REASONS
            ),
            worker_metric(obs.skipped_metric(SKIP_REASON_BUDGET), "Sum").with_(label="budget (queued ahead)"),
        ],
        stacked=True,
        width=24,
    )
