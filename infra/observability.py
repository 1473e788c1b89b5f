"""Alerts and the operator's view: an SNS alert topic, a CloudWatch dashboard, alarms.

The application metrics (ScheduleLag, Runs*; names in :mod:`jobsched.runtime.observability`) are Powertools
EMF metrics in namespace ``jobsched`` whose only dimension is ``service`` = the emitting function's
name. Run outcomes come from several functions, so the dashboard sums them over every ``service``
with a SEARCH expression; the lag alarm needs one concrete metric and watches the worker's, which is
where the lag is measured. docs/operations.md says what each alarm means and what to do.

How long runs wait is watched on the system's own figure, not SQS's: the dispatcher sends runs up to
900 s ahead with ``DelaySeconds`` and the worker re-sends retries with a backoff delay, and SQS's
``ApproximateAgeOfOldestMessage`` ("the approximate age of the oldest non-deleted message in the
queue") counts those delays and the minutes a running run's message is in flight, so an alarm on it
sat in ALARM on any queue with runs ahead. The ``OldestRun-<priority>`` alarms watch the sweeper's
``OldestQueuedRunAge<Priority>`` instead: seconds since the due instant of the oldest run still
``queued``. The ``long`` queue carries chunk tasks from Step Functions, never delayed, so it keeps
the SQS metric, with the time a chunk may be in flight (the worker's timeout) added to the threshold
(docs/decisions/0040). The ``container`` queue's messages may be in flight for hours (a run of up to
12 hours), so its ``OldestMessage-container`` alarm reads SQS's age only while messages are visible:
work that waits and that no container task takes (the pool at its ceiling, or tasks failing to start).
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.config import StackConfig
from infra.pool_metrics import (
    RUNBOOK_PAGE,
    app_metric,
    pool_ceilings,
    pool_rows,
    runbook_anchor,
    skipped_by_reason,
    worker_metric,
)
from infra.queues import DLQ_CONSUMER, QUEUE_CONSUMER
from jobsched.runtime import observability as obs
from jobsched.runtime.resources import CONTAINER_KIND, FUNCTIONS, POOLS, PRIORITIES

MINUTE = cdk.Duration.minutes(1)
#: How long a message of the ``long`` queue may be in flight: a chunk task runs in one worker invocation.
CHUNK_IN_FLIGHT_SECONDS = next(spec.timeout_seconds for spec in FUNCTIONS if spec.name == QUEUE_CONSUMER)
#: The functions that dead-letter runs (the worker also for chunked runs), i.e. emit RunsDeadLettered.
DEAD_LETTERING = (QUEUE_CONSUMER, DLQ_CONSUMER, "sweeper")
RUN_OUTCOMES = (
    obs.RUNS_SUCCEEDED,
    obs.RUNS_FAILED,
    obs.RUNS_RETRIED,
    obs.RUNS_DEAD_LETTERED,
    obs.RUNS_SKIPPED,
    obs.RUNS_CANCELLED,
)


def waiting_age(queue: sqs.IQueue) -> cw.MathExpression:
    """SQS's age of the queue's oldest message while messages are visible, else 0: SQS counts messages
    in flight too, and a container run may be in flight for hours (infra/containers.py scales on it)."""
    return cw.MathExpression(
        expression="IF(visible > 0, age, 0)",
        using_metrics={
            "visible": queue.metric_approximate_number_of_messages_visible(
                period=MINUTE, statistic="Maximum"
            ),
            "age": queue.metric_approximate_age_of_oldest_message(period=MINUTE, statistic="Maximum"),
        },
        period=MINUTE,
        label="container: oldest message while messages wait (SQS, s)",
    )


@dataclass(frozen=True)
class Watched:
    """What the dashboard and alarms look at (built by the other constructs)."""

    queues: dict[str, sqs.IQueue]  # kind -> queue
    dlqs: dict[str, sqs.IQueue]  # name -> dead-letter queue (run DLQs and the scheduler's)
    functions: dict[str, lambda_.IFunction]  # spec name -> function
    #: the container pool's ECS service (None without the pool): its running tasks are its utilisation
    container_service: ecs.FargateService | None = None


def total_over_services(name: str) -> cw.MathExpression:
    """The per-minute sum of ``name`` over every function that emits it (a SEARCH expression)."""
    return cw.MathExpression(
        expression=f"SUM(SEARCH('{{{obs.NAMESPACE},service}} MetricName=\"{name}\"', 'Sum', 60))",
        label=name,
        period=MINUTE,
    )


#: The AWS console's host in each partition, for the dashboard's URL (a stack output).
CONSOLE_HOSTS = {
    "aws": "console.aws.amazon.com",
    "aws-cn": "console.amazonaws.cn",
    "aws-us-gov": "console.amazonaws-us-gov.com",
}


class Observability(Construct):
    """``topic`` (alerts), ``dashboard`` and ``alarms`` (name -> alarm, every one notifies the topic)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        watched: Watched,
        key: kms.IKey | None = None,
    ):
        super().__init__(scope, construct_id)
        # CloudWatch alarms can publish to an encrypted topic only with a customer-managed key that
        # lets cloudwatch.amazonaws.com use it (the AWS-managed SNS key does not): the stack's key
        # with encryption=cmk, else a key of the topic's own.
        if key is None:
            key = kms.Key(self, "AlertKey", enable_key_rotation=True, description="jobsched alert topic")
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"), "kms:Decrypt", "kms:GenerateDataKey*")
        self.topic = sns.Topic(
            self, "Alerts", display_name="jobsched alerts", master_key=key, enforce_ssl=True
        )
        if config.alert_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(config.alert_email))
        self.alarms: dict[str, cw.Alarm] = {}
        self._add_alarms(config, watched)
        self._add_pool_alarms(config)
        self._docs = config.docs_url.rstrip("/") if config.docs_url else "docs"
        self._link_runbooks()
        # An explicit name, the stack's and its region's: dashboards are global to the account, so two
        # regions' stacks of the same name get two dashboards (CloudWatch: letters, digits, - and _).
        self.dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=cdk.Fn.join("-", [cdk.Stack.of(self).stack_name, cdk.Aws.REGION]),
            default_interval=cdk.Duration.hours(3),
        )
        self._add_widgets(watched, cdk.Duration.minutes(config.sweeper_rate_minutes))
        self._add_pool_widgets(config, watched)

    def _alarm(self, name: str, alarm: cw.Alarm) -> None:
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms[name] = alarm

    def _add_alarms(self, config: StackConfig, watched: Watched) -> None:
        for name, dlq in watched.dlqs.items():
            metric = dlq.metric_approximate_number_of_messages_visible(period=MINUTE, statistic="Maximum")
            self._alarm(
                f"DlqNotEmpty-{name}",
                metric.create_alarm(
                    self,
                    f"DlqNotEmpty{name.title()}",
                    alarm_description=f"The {name} dead-letter queue holds messages "
                    "(poison or failed deliveries).",
                    threshold=1,
                    evaluation_periods=1,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                ),
            )
        sweep_period = cdk.Duration.minutes(config.sweeper_rate_minutes)
        for priority in PRIORITIES:
            metric = app_metric(obs.oldest_queued_run_age(priority), "Maximum", "sweeper")
            self._alarm(
                f"OldestRun-{priority}",
                metric.with_(period=sweep_period).create_alarm(
                    self,
                    f"OldestRun{priority.title()}",
                    alarm_description=f"A {priority} run has waited in its queue more than "
                    f"{config.alarm_oldest_run_seconds} s since it was due (workers saturated, throttled "
                    "or failing; the sweeper measures it at every sweep).",
                    threshold=config.alarm_oldest_run_seconds,
                    # a sweep every period: alarm on one late sweep of the last two, clear after two
                    evaluation_periods=2,
                    datapoints_to_alarm=1,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                ),
            )
        long_threshold = config.alarm_oldest_run_seconds + CHUNK_IN_FLIGHT_SECONDS
        self._alarm(
            "OldestMessage-long",
            watched.queues["long"]
            .metric_approximate_age_of_oldest_message(period=MINUTE, statistic="Maximum")
            .create_alarm(
                self,
                "OldestMessageLong",
                alarm_description=f"A chunk task has been on the long queue more than {long_threshold} s "
                f"({config.alarm_oldest_run_seconds} s waiting beyond the {CHUNK_IN_FLIGHT_SECONDS} s a "
                "chunk may run): workers saturated or failing.",
                threshold=long_threshold,
                evaluation_periods=3,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        )
        if CONTAINER_KIND in watched.queues:
            self._alarm(
                f"OldestMessage-{CONTAINER_KIND}",
                waiting_age(watched.queues[CONTAINER_KIND]).create_alarm(
                    self,
                    "OldestMessageContainer",
                    alarm_description="The container queue has held visible messages for 3 minutes while "
                    f"its oldest message is more than {config.alarm_oldest_run_seconds} s old: runs wait "
                    "that no container task takes (the pool at container_max_tasks, or tasks failing to "
                    "start: see the service's events).",
                    threshold=config.alarm_oldest_run_seconds,
                    evaluation_periods=3,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                ),
            )
        self._alarm(
            "RunsStranded",
            app_metric(obs.RUNS_STRANDED, "Sum", "sweeper").create_alarm(
                self,
                "RunsStranded",
                alarm_description="The sweeper gave up on a run: it ended failed (reason stranded) in the "
                "dead letters after 3 re-sends; messages are being lost or no worker takes them.",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        )
        self._alarm(
            "RunsMissedDeadline",
            app_metric(obs.RUNS_MISSED_DEADLINE, "Sum", "sweeper").create_alarm(
                self,
                "RunsMissedDeadline",
                alarm_description="A scheduled run had not succeeded by its job's deadline_seconds, or an "
                "occurrence got no run by then (dispatch behind); the owners were notified.",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        )
        self._alarm(
            "ScheduleLagP99",
            app_metric(obs.SCHEDULE_LAG, "p99", QUEUE_CONSUMER).create_alarm(
                self,
                "ScheduleLagP99",
                alarm_description=f"p99 of (attempt start - due) above {config.alarm_lag_p99_seconds} s "
                "for 5 minutes.",
                threshold=config.alarm_lag_p99_seconds,
                evaluation_periods=5,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        )
        # An alarm cannot use SEARCH: the sum of the three functions' own metrics (missing = 0).
        dead = {f"d{i}": app_metric(obs.RUNS_DEAD_LETTERED, "Sum", s) for i, s in enumerate(DEAD_LETTERING)}
        dead_letters = cw.MathExpression(
            expression=" + ".join(f"FILL({key}, 0)" for key in dead),
            using_metrics={k: m.with_(period=cdk.Duration.minutes(5)) for k, m in dead.items()},
            label="runs dead-lettered (5 min)",
            period=cdk.Duration.minutes(5),
        )
        self._alarm(
            "DeadLetters",
            dead_letters.create_alarm(
                self,
                "DeadLetters",
                alarm_description=f"{config.alarm_dead_letters} or more runs were dead-lettered in 5 "
                "minutes (failed for good: permanent error, attempts used up, lost worker, poison message).",
                threshold=config.alarm_dead_letters,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            ),
        )
        for name, function in watched.functions.items():
            rate = cw.MathExpression(
                expression="100 * errors / MAX([invocations, 1])",
                using_metrics={
                    "errors": function.metric_errors(period=cdk.Duration.minutes(5), statistic="Sum"),
                    "invocations": function.metric_invocations(
                        period=cdk.Duration.minutes(5), statistic="Sum"
                    ),
                },
                label=f"{name} error rate (%)",
                period=cdk.Duration.minutes(5),
            )
            self._alarm(
                f"ErrorRate-{name}",
                rate.create_alarm(
                    self,
                    f"ErrorRate{name.title().replace('_', '')}",
                    alarm_description=f"More than {config.alarm_error_rate_percent}% of {name} invocations "
                    "failed over 10 minutes.",
                    threshold=config.alarm_error_rate_percent,
                    evaluation_periods=2,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                ),
            )

    def _add_widgets(self, watched: Watched, sweep_period: cdk.Duration) -> None:
        d = self.dashboard
        d.add_widgets(
            cw.GraphWidget(
                title="Schedule lag (s, attempt start - due)",
                left=[
                    app_metric(obs.SCHEDULE_LAG, stat, QUEUE_CONSUMER).with_(label=f"lag {stat}")
                    for stat in ("p50", "p99")
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="Runs by outcome (per minute)",
                left=[total_over_services(name) for name in RUN_OUTCOMES],
                stacked=True,
                width=12,
            ),
        )
        d.add_widgets(
            cw.GraphWidget(
                title="Queue depth (visible messages); jobs held back",
                left=[
                    q.metric_approximate_number_of_messages_visible(period=MINUTE, label=kind)
                    for kind, q in watched.queues.items()
                ],
                # backpressure: due jobs the dispatcher left for a later tick (docs/operations.md)
                right=[total_over_services(obs.JOBS_HELD_BACK)],
                width=8,
            ),
            cw.GraphWidget(
                title="Oldest due run still queued (s since due, per sweep); long and container queues: "
                "oldest message",
                left=[
                    app_metric(obs.oldest_queued_run_age(p), "Maximum", "sweeper").with_(
                        period=sweep_period, label=p
                    )
                    for p in PRIORITIES
                ],
                right=[
                    watched.queues["long"].metric_approximate_age_of_oldest_message(
                        period=MINUTE, statistic="Maximum", label="long: oldest message (SQS, s)"
                    ),
                    *(
                        [waiting_age(watched.queues[CONTAINER_KIND])]
                        if CONTAINER_KIND in watched.queues
                        else []
                    ),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Dead-letter queue depth",
                left=[
                    q.metric_approximate_number_of_messages_visible(period=MINUTE, label=name)
                    for name, q in watched.dlqs.items()
                ],
                width=8,
            ),
        )
        functions = watched.functions
        d.add_widgets(
            cw.GraphWidget(
                title="Run duration (s, handler time per attempt)",
                left=[
                    app_metric(obs.RUN_DURATION, stat, QUEUE_CONSUMER).with_(label=f"run {stat}")
                    for stat in ("p50", "p99", "Maximum")
                ],
                width=6,
            ),
            cw.GraphWidget(
                title="Function errors",
                left=[f.metric_errors(period=MINUTE, label=name) for name, f in functions.items()],
                width=6,
            ),
            cw.GraphWidget(
                title="Throttles and concurrency",
                left=[
                    f.metric_throttles(period=MINUTE, label=f"{name} throttles")
                    for name, f in functions.items()
                ],
                right=[
                    f.metric(
                        "ConcurrentExecutions",
                        period=MINUTE,
                        statistic="Maximum",
                        label=f"{name} concurrency",
                    )
                    for name, f in functions.items()
                ],
                width=6,
            ),
            cw.GraphWidget(
                title="Dispatcher duration (ms)",
                left=[
                    functions["dispatcher"].metric_duration(period=MINUTE, statistic=stat, label=stat)
                    for stat in ("p50", "p99", "Maximum")
                ],
                width=6,
            ),
        )
        d.add_widgets(
            cw.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24),
        )

    def _add_pool_alarms(self, config: StackConfig) -> None:
        """Per pool: ``SuccessRate-<pool>`` (attempts that succeeded, in % of those that ended, below
        ``alarm_success_rate_percent`` for 10 minutes) and ``StartLagP99-<pool>`` (p99 of the pool's
        start lag above ``alarm_lag_p99_seconds``; the container pool, which starts tasks from 0 in a
        minute or two, above ``alarm_oldest_run_seconds``)."""
        five = cdk.Duration.minutes(5)
        for pool in POOLS:
            row = pool_rows(pool)
            self._alarm(
                f"SuccessRate-{pool}",
                row.success_rate(five).create_alarm(
                    self,
                    f"SuccessRate{pool.title()}",
                    alarm_description=f"Less than {config.alarm_success_rate_percent}% of the {pool} pool's "
                    "attempts succeeded over 10 minutes (failed attempts: retried, dead-lettered or lost).",
                    threshold=config.alarm_success_rate_percent,
                    evaluation_periods=2,
                    comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                ),
            )
            threshold = (
                config.alarm_oldest_run_seconds if pool == CONTAINER_KIND else config.alarm_lag_p99_seconds
            )
            self._alarm(
                f"StartLagP99-{pool}",
                worker_metric(obs.pool_metric(obs.SCHEDULE_LAG, pool), "p99").create_alarm(
                    self,
                    f"StartLagP99{pool.title()}",
                    alarm_description=f"p99 of the {pool} pool's start lag (attempt start - due) above "
                    f"{threshold} s for 5 minutes.",
                    threshold=threshold,
                    evaluation_periods=5,
                    comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                ),
            )

    def _link_runbooks(self) -> None:
        """Every alarm's description ends with the link to its section of docs/operations.md
        (:data:`infra.pool_metrics.RUNBOOK`); an alarm added without a section there fails here."""
        for name, alarm in self.alarms.items():
            cfn = alarm.node.default_child
            anchor = runbook_anchor(name)
            if anchor is not None and isinstance(cfn, cw.CfnAlarm):
                cfn.alarm_description = (
                    f"{cfn.alarm_description} Runbook: {self._docs}/{RUNBOOK_PAGE}#{anchor}"
                )

    def _add_pool_widgets(self, config: StackConfig, watched: Watched) -> None:
        """A row per pool (start lag, run duration, success rate, retries and dead letters,
        utilisation, forecast against capacity), then runs skipped by reason."""
        ceilings = pool_ceilings(config)
        for pool in POOLS:
            row = pool_rows(pool)
            if pool == CONTAINER_KIND:
                busy = row.container_busy(watched.container_service)
            else:
                busy = row.lambda_busy([watched.functions[name] for name in row.functions])
            self.dashboard.add_widgets(
                cw.TextWidget(markdown=f"### Pool `{pool}`", width=24, height=1),
            )
            self.dashboard.add_widgets(*row.widgets(busy, ceilings[pool]))
        self.dashboard.add_widgets(skipped_by_reason())

    @property
    def dashboard_url(self) -> str:
        """The dashboard in the AWS console of the stack's partition (China and GovCloud have their own)."""
        consoles = self.node.try_find_child("Console") or cdk.CfnMapping(
            self,
            "Console",
            mapping={partition: {"host": host} for partition, host in CONSOLE_HOSTS.items()},
        )
        assert isinstance(consoles, cdk.CfnMapping)
        host = consoles.find_in_map(cdk.Aws.PARTITION, "host")
        return (
            f"https://{host}/cloudwatch/home?region={cdk.Aws.REGION}"
            f"#dashboards:name={self.dashboard.dashboard_name}"
        )
