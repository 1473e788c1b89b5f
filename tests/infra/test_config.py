"""Deployment settings from CDK context: defaults, parsing of -c strings, validation."""

from __future__ import annotations

import json

import pytest

from infra.config import DEFAULT_MAX_CONCURRENCY, ConfigError, StackConfig
from infra.functions import retention
from jobsched.runtime.resources import DEFAULT_SHARDS

ROOT_CDK_JSON = __import__("pathlib").Path(__file__).resolve().parents[2] / "cdk.json"


def _from(context: dict) -> StackConfig:
    return StackConfig.from_context(context.get)


def test_empty_context_gives_the_documented_defaults():
    config = _from({})
    assert config.shards == DEFAULT_SHARDS
    assert config.max_concurrency == DEFAULT_MAX_CONCURRENCY
    assert config.auth_mode == "iam"
    assert config.alert_email is None


def test_cdk_json_context_matches_the_defaults():
    # Given cdk.json (what `cdk deploy` reads) / Then it documents exactly the code's defaults
    context = json.loads(ROOT_CDK_JSON.read_text())["context"]
    assert _from(context) == StackConfig()


def test_command_line_strings_are_parsed():
    config = _from(
        {
            "shards": "8",
            "max_concurrency": '{"high": 50}',
            "admin_principals": "arn:aws:iam::1:role/a, arn:aws:iam::1:role/b",
            "removal_policy_destroy": "true",
        }
    )
    assert config.shards == 8
    assert config.max_concurrency == {**DEFAULT_MAX_CONCURRENCY, "high": 50}
    assert config.admin_principals == ("arn:aws:iam::1:role/a", "arn:aws:iam::1:role/b")
    assert config.removal_policy_destroy is True


def test_backpressure_and_the_high_reservation_are_parsed_and_merged_with_the_defaults():
    # Given -c strings for one priority each / Then the other priorities keep their defaults
    config = _from(
        {
            "backpressure_depth": '{"default": 5000}',
            "backpressure_age_seconds": '{"low": 0}',
            "high_reserved_concurrency": "0",
        }
    )
    assert config.backpressure_depth == {"default": 5000, "low": 1000}
    assert config.backpressure_age_seconds == {"default": 0, "low": 0}
    assert config.high_reserved_concurrency == 0


def test_the_high_reservation_defaults_to_the_high_mappings_ceiling():
    # Given no setting / Then every invocation the high mapping may start is reserved; a larger
    # ceiling needs a reservation at least as large
    # (the ceiling has the default fair share's head-room, decision 0057: ceil(20 / 0.8) = 25,
    # ceil(50 / 0.8) = 63; with the share off, max_concurrency itself)
    assert StackConfig().high_reservation == StackConfig().mapping_ceiling("high") == 25
    assert DEFAULT_MAX_CONCURRENCY["high"] == 20
    assert _from({"max_concurrency": '{"high": 50}'}).high_reservation == 63
    assert _from({"max_concurrency": '{"high": 50}', "fair_share": "1"}).high_reservation == 50
    assert _from({"max_concurrency": '{"high": 50}', "fair_share": "0.8"}).high_reservation == 63
    config = _from({"max_concurrency": '{"high": 50}', "high_reserved_concurrency": "70"})
    assert (config.max_concurrency["high"], config.high_reservation) == (50, 70)


def test_worker_shares_are_each_mappings_ceiling_over_their_sum():
    # Given the default ceilings 20/20/5/5 / Then with every queue busy high and default get 40 % of
    # the worker executions each, low and long 10 % each (docs/semantics/limits.md, Priorities)
    assert StackConfig().worker_shares() == {"high": 0.4, "default": 0.4, "low": 0.1, "long": 0.1}


def test_default_tenant_limits_are_parsed():
    # Given -c strings for the per-tenant defaults / Then they are numbers (a rate may be fractional)
    config = _from({"tenant_max_running": "50", "tenant_runs_per_second": "2.5", "tenant_burst": "10"})
    assert (config.tenant_max_running, config.tenant_runs_per_second, config.tenant_burst) == (50, 2.5, 10)
    assert (StackConfig().tenant_max_running, StackConfig().tenant_runs_per_second) == (0, 0.0)


def test_notify_topic_patterns_of_one_account_with_a_name_prefix_are_accepted():
    config = _from(
        {"notify_topic_arns": "arn:aws:sns:*:123456789012:team-*, arn:aws:sns:eu-west-1:123456789012:ops"}
    )
    assert config.notify_topic_arns == (
        "arn:aws:sns:*:123456789012:team-*",
        "arn:aws:sns:eu-west-1:123456789012:ops",
    )


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"shards": "0"}, "shards"),
        ({"shards": "many"}, "shards"),
        ({"shards": "33"}, "shards must be between 1 and 32"),
        ({"max_concurrency": '{"high": 1}'}, "max_concurrency"),
        ({"auth_mode": "basic"}, "auth_mode"),
        ({"auth_mode": "jwt"}, "jwt_issuer"),
        ({"log_retention_days": "0"}, "log_retention_days"),
        ({"retention_days": "0"}, "retention_days"),
        ({"retention_days": "3651"}, "retention_days"),
        ({"retention_days": "a month"}, "retention_days"),
        ({"payload_retention_days": "30"}, "renamed retention_days"),
        ({"lookahead_seconds": "901"}, "lookahead_seconds"),
        ({"enqueue_horizon_seconds": "901"}, "enqueue_horizon_seconds must be between"),
        ({"lookahead_seconds": "120", "enqueue_horizon_seconds": "60"}, r"lookahead_seconds \(120\)"),
        ({"low_backlog_limit": "1000"}, "low_backlog_limit was replaced by backpressure_depth"),
        ({"backpressure_depth": '{"low": -1}'}, r"backpressure_depth\[low\] must be 0"),
        ({"backpressure_depth": '{"low": "lots"}'}, "backpressure_depth"),
        ({"backpressure_depth": '{"high": 10}'}, "never applies to high"),
        ({"backpressure_age_seconds": '{"high": 600}'}, "never applies to high"),
        ({"backpressure_depth": '{"urgent": 10}'}, "takes the priorities"),
        ({"backpressure_age_seconds": '{"default": 119}'}, r"backpressure_age_seconds\[default\] must be 0"),
        ({"backpressure_age_seconds": '{"low": 43201}'}, r"backpressure_age_seconds\[low\]"),
        ({"high_reserved_concurrency": "10"}, "high_reserved_concurrency must be 0"),
        ({"high_reserved_concurrency": "1001"}, "high_reserved_concurrency"),
        ({"high_reserved_concurrency": "-1"}, "high_reserved_concurrency"),
        (
            {"max_concurrency": '{"high": 50}', "high_reserved_concurrency": "40", "fair_share": "0.8"},
            r"between the high mapping's MaximumConcurrency \(63: max_concurrency\[high\]",
        ),
        ({"fair_share": "0"}, "fair_share must be a number from 0.1 to 1"),
        ({"fair_share": "1.5"}, "fair_share must be a number from 0.1 to 1"),
        ({"fair_share": "nan"}, "fair_share must be a number from 0.1 to 1"),
        ({"notify_topic_arns": "*"}, "notify_topic_arns"),
        ({"notify_topic_arns": "arn:aws:sns:us-east-1:*:team-*"}, "notify_topic_arns"),
        ({"notify_topic_arns": "arn:aws:sns:us-east-1:123456789012:*"}, "notify_topic_arns"),
        ({"notify_topic_arns": "arn:aws:sqs:us-east-1:123456789012:team-q"}, "notify_topic_arns"),
        ({"alarm_dead_letters": "0"}, "alarm_dead_letters"),
        ({"alarm_oldest_message_seconds": "300"}, "renamed alarm_oldest_run_seconds"),
        ({"alarm_oldest_run_seconds": "119"}, r"alarm_oldest_run_seconds must be 120 \(the sweeper"),
        ({"alarm_oldest_run_seconds": "43201"}, "alarm_oldest_run_seconds"),
        ({"tenant_max_running": "-1"}, "tenant_max_running"),
        ({"tenant_max_running": "1001"}, "tenant_max_running"),
        ({"tenant_runs_per_second": "fast"}, "tenant_runs_per_second"),
        ({"tenant_runs_per_second": "-0.5"}, "tenant_runs_per_second"),
        ({"tenant_burst": "0"}, "tenant_burst"),
    ],
)
def test_invalid_settings_are_rejected_naming_the_setting(context, message):
    with pytest.raises(ConfigError, match=message):
        _from(context)


@pytest.mark.parametrize(("days", "expected"), [(1, 1), (2, 3), (30, 30), (31, 60), (10_000, 3653)])
def test_log_retention_rounds_up_to_a_period_cloudwatch_accepts(days, expected):
    from infra.functions import _RETENTIONS

    assert retention(days) == _RETENTIONS[expected]
