"""Alert topic, dashboard, alarms: each alarm notifies the topic; the dashboard shows what ops need."""

from __future__ import annotations

import json

from jobsched.runtime.resources import FUNCTIONS, PRIORITIES, QUEUES


def _alarms(synth) -> list[dict]:
    return [a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()]


def _dashboard_body(synth) -> str:
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    # DashboardBody is an Fn::Join of literal strings and tokens; the literals hold the metric names
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else json.dumps(p) for p in parts)


def test_alert_topic_is_encrypted_with_a_key_cloudwatch_may_use(synth):
    (topic,) = synth.resources("AWS::SNS::Topic").values()
    assert "KmsMasterKeyId" in topic["Properties"]
    (key,) = synth.resources("AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    principals = [s["Principal"] for s in key["Properties"]["KeyPolicy"]["Statement"]]
    assert {"Service": "cloudwatch.amazonaws.com"} in principals


def test_no_email_subscription_unless_configured(synth):
    synth.assertions.resource_count_is("AWS::SNS::Subscription", 0)


def test_every_alarm_notifies_the_alert_topic(synth):
    topic = {"Ref": synth.logical_id(synth.stack.observability.topic)}
    alarms = _alarms(synth)
    assert alarms
    assert all(a["AlarmActions"] == [topic] and a["OKActions"] == [topic] for a in alarms)


def test_alarm_set_covers_dlqs_queue_age_lag_dead_letters_stranded_runs_and_error_rates(synth):
    # Given 4 queues (+ the scheduler DLQ) and 6 functions (5 specs, the worker's twice: the high
    # worker) / Then: a DLQ-not-empty alarm per DLQ, an oldest-run alarm per priority and one on the
    # long queue's oldest message, one lag p99 alarm, one dead-letter alarm, one on runs declared
    # stranded and an error-rate alarm per function
    names = set(synth.stack.observability.alarms)
    expected = (
        {f"DlqNotEmpty-{q.kind}" for q in QUEUES}
        | {"DlqNotEmpty-schedule", "ScheduleLagP99", "DeadLetters", "RunsStranded"}
        | {f"OldestRun-{p}" for p in PRIORITIES}
        | {"OldestMessage-long"}
        | {f"ErrorRate-{f.name}" for f in FUNCTIONS}
        | {"ErrorRate-worker_high"}
    )
    assert names == expected
    assert len(_alarms(synth)) == len(expected)


def test_run_age_alarms_watch_the_sweepers_oldest_queued_run_not_the_delayed_messages(synth):
    # Given runs queued up to 900 s ahead with DelaySeconds, which SQS's ApproximateAgeOfOldestMessage
    # counts / Then the priority queues' age alarms watch the sweeper's age of the oldest due run, one
    # sweep period at a time, at the configured threshold; only the long queue (chunk tasks, never
    # delayed) keeps an alarm on the SQS metric, its threshold raised by the time a chunk may run
    config = synth.stack.config
    runs = {a["MetricName"]: a for a in _alarms(synth) if a.get("MetricName", "").startswith("OldestQueued")}
    assert set(runs) == {f"OldestQueuedRunAge{p.title()}" for p in PRIORITIES}
    for alarm in runs.values():
        assert alarm["Namespace"] == "jobsched"
        assert alarm["Dimensions"] == [{"Name": "service", "Value": "sweeper"}]
        assert (alarm["Statistic"], alarm["Period"]) == ("Maximum", 60 * config.sweeper_rate_minutes)
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (300, "GreaterThanThreshold")
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (2, 1)
    (sqs_age,) = [a for a in _alarms(synth) if a.get("MetricName") == "ApproximateAgeOfOldestMessage"]
    long_queue = synth.logical_id(synth.stack.queues.queue("long"))
    queue_name = {"Fn::GetAtt": [long_queue, "QueueName"]}
    assert sqs_age["Dimensions"] == [{"Name": "QueueName", "Value": queue_name}]
    assert sqs_age["Threshold"] == config.alarm_oldest_run_seconds + 900


def test_stranded_alarm_fires_on_one_run_declared_stranded_by_the_sweeper(synth):
    (stranded,) = [a for a in _alarms(synth) if a.get("MetricName") == "RunsStranded"]
    assert (stranded["Statistic"], stranded["Threshold"], stranded["Namespace"]) == ("Sum", 1, "jobsched")
    assert stranded["Dimensions"] == [{"Name": "service", "Value": "sweeper"}]


def test_lag_alarm_watches_p99_of_the_schedule_lag_metric(synth):
    (lag,) = [a for a in _alarms(synth) if a.get("MetricName") == "ScheduleLag"]
    assert lag["ExtendedStatistic"] == "p99"
    assert lag["Threshold"] == synth.stack.config.alarm_lag_p99_seconds
    assert lag["Namespace"] == "jobsched"
    # The worker measures the lag; its metrics carry service=<function name>
    assert lag["Dimensions"] == [{"Name": "service", "Value": "worker"}]


def test_dlq_alarm_fires_on_a_single_message(synth):
    dlq_alarms = [a for a in _alarms(synth) if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"]
    assert len(dlq_alarms) == len(QUEUES) + 1
    assert all(
        a["Threshold"] == 1 and a["ComparisonOperator"] == "GreaterThanOrEqualToThreshold" for a in dlq_alarms
    )


def test_dashboard_shows_lag_outcomes_queues_dlqs_errors_throttles_concurrency_duration(synth):
    body = _dashboard_body(synth)
    for needle in (
        "ScheduleLag",
        '"p50"',
        '"p99"',
        "RunsSucceeded",
        "RunsDeadLettered",
        "ApproximateNumberOfMessagesVisible",
        "OldestQueuedRunAgeHigh",
        "OldestQueuedRunAgeDefault",
        "OldestQueuedRunAgeLow",
        "ApproximateAgeOfOldestMessage",  # the long queue's (chunk tasks, never delayed)
        "Errors",
        "Throttles",
        "ConcurrentExecutions",
        "Duration",
        "Dead-letter queue depth",
        "JobsHeldBack",  # backpressure on the low queue, beside the queue depths
    ):
        assert needle in body, needle


def test_dead_letter_alarm_sums_the_dead_letter_metric_of_every_function_that_dead_letters(synth):
    # Given the worker, the DLQ consumer and the sweeper each emit RunsDeadLettered (service = name)
    alarm = synth.stack.observability.alarms["DeadLetters"]
    (props,) = [a for a in _alarms(synth) if a.get("AlarmDescription", "").startswith("1 or more runs")]
    # Then the alarm's expression adds the three (missing data as 0), over 5 minutes, at >= 1
    metrics = props["Metrics"]
    (expression,) = [m for m in metrics if "Expression" in m]
    assert expression["Expression"].count("FILL(") == 3
    watched = {
        (m["MetricStat"]["Metric"]["MetricName"], m["MetricStat"]["Metric"]["Dimensions"][0]["Value"])
        for m in metrics
        if "MetricStat" in m
    }
    assert watched == {("RunsDeadLettered", s) for s in ("worker", "dlq_consumer", "sweeper")}
    assert {m["MetricStat"]["Period"] for m in metrics if "MetricStat" in m} == {300}
    assert props["Threshold"] == 1 and props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm is not None
