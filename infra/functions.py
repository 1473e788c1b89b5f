"""The one Lambda function factory: runtime, architecture, memory, timeout, logging, tracing, env.

Every jobsched function is built here from its :class:`jobsched.runtime.resources.FunctionSpec`, so the five
functions cannot drift apart in how they run. Each gets its own role (no AWS-managed policy: the
factory grants log writes to the function's own log group) and its own log group with retention.
With the stack's customer-managed key (``encryption=cmk``) the log group and the environment
variables are encrypted with it. The checkov checks that do not fit a function of ours are skipped
here with their reasons (:data:`FUNCTION_CHECK_REASONS`, docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.bundling import LAMBDA_ARCHITECTURE, LAMBDA_RUNTIME
from infra.config import StackConfig
from infra.encryption import AWS_KEY_REASONS
from infra.nag import acknowledge, skip_checkov
from jobsched.runtime.observability import NAMESPACE
from jobsched.runtime.resources import FUNCTIONS, FunctionSpec

# CloudWatch Logs accepts only these retention periods (days).
_RETENTIONS = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    120: logs.RetentionDays.FOUR_MONTHS,
    150: logs.RetentionDays.FIVE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    400: logs.RetentionDays.THIRTEEN_MONTHS,
    545: logs.RetentionDays.EIGHTEEN_MONTHS,
    731: logs.RetentionDays.TWO_YEARS,
    1096: logs.RetentionDays.THREE_YEARS,
    1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


# checkov checks skipped on every function, with the reason (docs/deploy.md, decision 0018).
FUNCTION_CHECK_REASONS = {
    "CKV_AWS_117": "Not in a VPC: the functions reach only AWS APIs (DynamoDB, SQS, S3, Step Functions) "
    "and webhook targets on the internet; there is no private resource to reach, a VPC would add NAT "
    "gateway cost, and the webhook SSRF guard already refuses loopback, private, link-local and "
    "metadata destinations (but for hosts on allowed_http_hosts).",
    "CKV_AWS_116": "No Lambda DLQ: no function is invoked with an event that holds work. The worker and "
    "DLQ consumer read SQS through event source mappings (failures redrive to each queue's DLQ), the "
    "API is invoked synchronously by API Gateway, and the dispatcher, sweeper and capacity function receive "
    "only a tick from EventBridge Scheduler (its target has its own DLQ; the next tick redoes a failed one).",
    "CKV_AWS_115": "No reserved concurrency: a reservation is taken from the account's unreserved "
    "pool, which must keep 100, so each one raises the account quota a deploy needs; only the high "
    "worker has one (high_reserved_concurrency, docs/decisions/0028). The shared worker is bounded by "
    "each queue mapping's MaximumConcurrency, the DLQ consumer by its mappings' 2 each, the API by the "
    "stage's throttling, the dispatcher, sweeper and capacity function by their schedules.",
}


def function_spec(name: str) -> FunctionSpec:
    """The spec of the function called ``name`` (raises KeyError naming it when there is none)."""
    for spec in FUNCTIONS:
        if spec.name == name:
            return spec
    raise KeyError(f"no function named {name!r} in jobsched.runtime.resources.FUNCTIONS")


def retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch retention period that keeps logs at least ``days`` days."""
    allowed = sorted(_RETENTIONS)
    for value in allowed:
        if value >= days:
            return _RETENTIONS[value]
    return _RETENTIONS[allowed[-1]]


def make_log_group(
    scope: Construct, construct_id: str, *, config: StackConfig, key: kms.IKey | None = None
) -> logs.LogGroup:
    """A log group with the deployment's retention, deleted with the stack, encrypted with ``key``
    (CloudWatch Logs' own encryption when there is none)."""
    log_group = logs.LogGroup(
        scope,
        construct_id,
        retention=retention(config.log_retention_days),
        encryption_key=key,
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    if key is None:
        skip_checkov(log_group, "CKV_AWS_158", AWS_KEY_REASONS["CKV_AWS_158"])
    return log_group


def make_function(
    scope: Construct,
    spec: FunctionSpec,
    *,
    code: lambda_.Code,
    config: StackConfig,
    environment: Mapping[str, str],
    key: kms.IKey | None = None,
    construct_id: str | None = None,
    reserved_concurrency: int | None = None,
    log_group: logs.ILogGroup | None = None,
) -> lambda_.Function:
    """Build the function for ``spec`` under ``scope`` (construct id = the spec's name, or
    ``construct_id`` for a second function of the same spec).

    ``reserved_concurrency`` (> 0) reserves that many concurrent executions for it (taken from the
    account's unreserved pool; then checkov's CKV_AWS_115 passes and is not skipped). ``log_group``
    shares another function's log group (the high worker writes to the worker's, so a run's logs are in
    one group whichever queue it came from); by default the function gets its own.
    """
    construct_id = construct_id or "".join(part.title() for part in spec.name.split("_"))
    if log_group is None:
        log_group = make_log_group(scope, f"{construct_id}Logs", config=config, key=key)
    role = iam.Role(
        scope,
        f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"jobsched {spec.name} function: only what it uses, granted per resource",
    )
    log_group.grant_write(role)
    function = lambda_.Function(
        scope,
        construct_id,
        description=spec.doc,
        code=code,
        handler=spec.handler,
        runtime=LAMBDA_RUNTIME,
        architecture=LAMBDA_ARCHITECTURE,
        memory_size=spec.memory_mb,
        timeout=cdk.Duration.seconds(spec.timeout_seconds),
        role=role,
        log_group=log_group,
        logging_format=lambda_.LoggingFormat.JSON,
        application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
        system_log_level_v2=lambda_.SystemLogLevel.WARN,
        tracing=lambda_.Tracing.ACTIVE,
        environment_encryption=key,
        reserved_concurrent_executions=reserved_concurrency or None,
        environment={
            # The metric dimension `service` is the function's name (the dashboard reads it so).
            "POWERTOOLS_SERVICE_NAME": spec.name,
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            "POWERTOOLS_LOG_LEVEL": "INFO",
            **environment,
        },
    )
    if key is None:
        skip_checkov(function, "CKV_AWS_173", AWS_KEY_REASONS["CKV_AWS_173"])
    else:
        key.grant_decrypt(role)  # Lambda decrypts the environment under the execution role
    for check_id, reason in FUNCTION_CHECK_REASONS.items():
        if check_id == "CKV_AWS_115" and reserved_concurrency:
            continue  # it has a reservation: the check passes
        skip_checkov(function, check_id, reason)
    return function


def grant_notify_publish(grantee: iam.IGrantable, config: StackConfig) -> None:
    """``sns:Publish`` for a function (or the container pool's task role) that sends dead-letter
    notifications, on exactly the topics of the deployment's ``notify_topic_arns`` allow-list (nothing
    when it is empty: webhooks only)."""
    patterns = list(config.notify_topic_arns)
    if not patterns:
        return
    iam.Grant.add_to_principal(grantee=grantee, actions=["sns:Publish"], resource_arns=patterns)
    role = grantee.role if isinstance(grantee, lambda_.Function) else grantee
    assert role is not None
    for pattern in patterns:
        if "*" in pattern or "?" in pattern:
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{pattern}]",
                "Dead-letter notifications go to the teams' own SNS topics, named when a job is written; the "
                "operator's notify_topic_arns allow-list (docs/deploy.md) bounds them to one account and a "
                "name pattern, and the API refuses any topic outside it. The only action is sns:Publish.",
            )
