"""Alert topic, dashboard, alarms: each alarm notifies the topic; the dashboard shows what ops need."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from jobsched.runtime.resources import FUNCTIONS, POOLS, PRIORITIES, QUEUES

DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def _all_alarms(synth) -> list[dict]:
    """Every alarm of the template: the alerting ones and the container pool's scaling alarms."""
    return [a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()]


def _scaling_policies(synth) -> set[str]:
    return set(synth.resources("AWS::ApplicationAutoScaling::ScalingPolicy"))


def _alarms(synth) -> list[dict]:
    """The alerting alarms: every alarm but those that drive a scaling policy of the container pool."""
    policies = _scaling_policies(synth)
    return [
        a for a in _all_alarms(synth) if not {action.get("Ref") for action in a["AlarmActions"]} & policies
    ]


def _widgets(synth) -> dict[str, tuple[list[Any], list[Any]]]:
    """``{title: (metrics, tokens)}`` of the dashboard's graph widgets: each metric as the dashboard
    JSON writes it (``[namespace, name, dimension, value, ...]``, or ``[{"expression": ...}]``); a value
    that is a template token (a function or queue name) reads ``"__TOKEN<i>__"``, ``tokens[i]`` being
    the token itself (``{"Ref": ...}``)."""
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    tokens = [p for p in parts if not isinstance(p, str)]
    placeholders = iter(range(len(tokens)))
    body = "".join(p if isinstance(p, str) else f"__TOKEN{next(placeholders)}__" for p in parts)
    widgets = json.loads(body)["widgets"]
    return {
        w["properties"]["title"]: (w["properties"].get("metrics", []), tokens)
        for w in widgets
        if w["type"] == "metric"
    }


def _named(metrics: list[Any], namespace: str, name: str) -> list[list[Any]]:
    return [m for m in metrics if isinstance(m[0], str) and m[:2] == [namespace, name]]


def _named_prefix(metrics: list[Any], namespace: str, prefix: str) -> list[list[Any]]:
    return [m for m in metrics if isinstance(m[0], str) and m[0] == namespace and m[1].startswith(prefix)]


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
    # but the container pool's three scaling alarms, each of which drives one scaling policy and no more
    scaling = [a for a in _all_alarms(synth) if a not in alarms]
    assert len(scaling) == 3
    assert sorted(a["AlarmActions"][0]["Ref"] for a in scaling) == sorted(_scaling_policies(synth))
    assert all(len(a["AlarmActions"]) == 1 and "OKActions" not in a for a in scaling)


def test_alarm_set_covers_dlqs_queue_age_lag_dead_letters_stranded_runs_and_error_rates(synth):
    # Given 5 queues (+ the scheduler DLQ) and 7 functions (5 specs, the worker's three times: the high
    # and long workers) / Then: a DLQ-not-empty alarm per DLQ, an oldest-run alarm per priority and one
    # on each of the long and container queues' oldest message, one lag p99 alarm, one dead-letter
    # alarm, one on runs declared stranded, an error-rate alarm per function, and per pool a
    # success-rate and a start-lag p99 alarm (issue 31 §5)
    names = set(synth.stack.observability.alarms)
    expected = (
        {f"DlqNotEmpty-{q.kind}" for q in QUEUES}
        | {"DlqNotEmpty-schedule", "ScheduleLagP99", "DeadLetters", "RunsStranded"}
        | {"RunsMissedDeadline"}
        | {f"OldestRun-{p}" for p in PRIORITIES}
        | {"OldestMessage-long", "OldestMessage-container"}
        | {f"ErrorRate-{f.name}" for f in FUNCTIONS}
        | {"ErrorRate-worker_high", "ErrorRate-worker_long"}
        | {f"SuccessRate-{p}" for p in POOLS}
        | {f"StartLagP99-{p}" for p in POOLS}
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


def test_deadline_alarm_fires_on_one_missed_deadline_reported_by_the_sweeper(synth):
    (missed,) = [a for a in _alarms(synth) if a.get("MetricName") == "RunsMissedDeadline"]
    assert (missed["Statistic"], missed["Threshold"], missed["Namespace"]) == ("Sum", 1, "jobsched")
    assert missed["Dimensions"] == [{"Name": "service", "Value": "sweeper"}]
    assert "docs/operations.md#runsmisseddeadline" in missed["AlarmDescription"]


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
    """Given the dashboard's widgets by title, Then each shows its own metrics (issue 27 §6: a search
    for "Duration" anywhere in the body found the dispatcher's widget whatever else was missing)."""
    widgets = _widgets(synth)
    lag, _ = widgets["Schedule lag (s, attempt start - due)"]
    assert {(m[1], m[-1]["stat"]) for m in lag} == {("ScheduleLag", "p50"), ("ScheduleLag", "p99")}
    outcomes, _ = widgets["Runs by outcome (per minute)"]
    labels = [m[0]["label"] for m in outcomes]
    assert {"RunsSucceeded", "RunsFailed", "RunsDeadLettered", "RunsCancelled"} <= set(labels)
    depth, _ = widgets["Queue depth (visible messages); jobs held back"]
    assert len(_named(depth, "AWS/SQS", "ApproximateNumberOfMessagesVisible")) == len(QUEUES)
    assert any("JobsHeldBack" in m[0].get("expression", "") for m in depth if isinstance(m[0], dict))
    age, tokens = widgets[
        "Oldest due run still queued (s since due, per sweep); long and container queues: oldest message"
    ]
    assert {m[1] for m in _named_prefix(age, "jobsched", "OldestQueuedRunAge")} == {
        f"OldestQueuedRunAge{p.title()}" for p in PRIORITIES
    }
    # SQS's own age only for the long queue (chunk tasks are never sent with a delay, decision 0040),
    # and for the container queue (runs in flight for hours) only while messages are visible
    sqs_ages = _named(age, "AWS/SQS", "ApproximateAgeOfOldestMessage")
    assert len(sqs_ages) == 2
    (hidden,) = [m for m in sqs_ages if m[-1].get("visible") is False]
    (visible,) = _named(age, "AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert (hidden[-1]["id"], visible[-1]["id"], visible[-1]["visible"]) == ("age", "visible", False)
    expressions = [m[0]["expression"] for m in age if isinstance(m[0], dict) and "expression" in m[0]]
    assert expressions == ["IF(visible > 0, age, 0)"]
    container = {"Fn::GetAtt": [synth.logical_id(synth.stack.queues.queue("container")), "QueueName"]}
    assert tokens[int(hidden[3].strip("_").removeprefix("TOKEN"))] == container
    assert tokens[int(visible[3].strip("_").removeprefix("TOKEN"))] == container
    dlq, _ = widgets["Dead-letter queue depth"]
    assert len(_named(dlq, "AWS/SQS", "ApproximateNumberOfMessagesVisible")) == len(QUEUES) + 1
    errors, _ = widgets["Function errors"]
    assert len(_named(errors, "AWS/Lambda", "Errors")) == len(synth.stack.functions)
    throttles, _ = widgets["Throttles and concurrency"]
    assert len(_named(throttles, "AWS/Lambda", "Throttles")) == len(synth.stack.functions)
    assert len(_named(throttles, "AWS/Lambda", "ConcurrentExecutions")) == len(synth.stack.functions)
    # the dispatcher's Lambda Duration, of the dispatcher function and no other
    duration, tokens = widgets["Dispatcher duration (ms)"]
    dispatcher = {"Ref": synth.logical_id(synth.stack.functions["dispatcher"])}
    lambda_durations = _named(duration, "AWS/Lambda", "Duration")
    assert {m[-1]["stat"] for m in lambda_durations} == {"p50", "p99", "Maximum"}
    assert all(tokens[int(m[3].strip("_").removeprefix("TOKEN"))] == dispatcher for m in lambda_durations)


def test_dashboard_graphs_the_handlers_run_duration(synth):
    """Given the dashboard, Then one widget graphs the jobsched RunDuration metric (seconds a handler
    ran, per attempt), not only the dispatcher's Lambda Duration."""
    found = {
        title: _named(metrics, "jobsched", "RunDuration")
        for title, (metrics, _) in _widgets(synth).items()
        if _named(metrics, "jobsched", "RunDuration")
    }
    assert list(found) == ["Run duration (s, handler time per attempt)"], found
    (durations,) = found.values()
    # the worker emits it (both worker functions run as service "worker"), at p50, p99 and maximum
    assert {(m[2], m[3], m[-1]["stat"]) for m in durations} == {
        ("service", "worker", stat) for stat in ("p50", "p99", "Maximum")
    }


def test_deploy_md_prices_the_alarm_metrics_the_stack_builds(synth):
    """Given the alarms in the template (CloudWatch bills each metric an alarm watches), When
    docs/deploy.md's idle cost names their number and kinds, Then they are the template's
    (issue 27 §4: the page said 20 while the stack built 26)."""
    per_alarm = [
        1 if "MetricName" in a else sum(1 for m in a["Metrics"] if "MetricStat" in m)
        for a in _all_alarms(synth)
    ]
    text = " ".join(DEPLOY_DOC.read_text().split())
    match = re.search(
        r"(\d+) alarm metrics ≈ \$([\d.]+)/month \((\d+) single-metric alarms, (\d+) alarms of "
        r"two metrics each [^;]*; (\d+) dead-letter alarm of three\)",
        text,
    )
    assert match, "docs/deploy.md no longer prices the alarm metrics in the form this test reads"
    total, usd, single, double, triple = match.groups()
    assert int(total) == sum(per_alarm)
    assert (int(single), int(double), int(triple)) == tuple(per_alarm.count(n) for n in (1, 2, 3))
    assert float(usd) == pytest.approx(sum(per_alarm) * 0.10)  # $0.10 per standard alarm metric


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
