"""Why a grant no recorded call used stays: each rule names the grants it covers and the reason.

Kinds:

* ``platform``: used by AWS on the function's behalf with its role, not by a call of the code
  (Lambda writes the function's logs and X-Ray segments; the event source mapping polls, deletes and
  re-times the messages of the queues the function consumes);
* ``cdk-grant``: part of a CDK grant method whose other actions the function uses; dropping it would
  mean replacing the construct library's grant with a hand-written copy;
* ``key``: a KMS action on the stack's key that AWS performs with the caller's credentials when the
  caller uses a resource encrypted with it (``encryption=cmk``), invisible to a recording on moto;
* ``path``: used on a path the tests do not reach on moto (named in the reason).

Patterns use the IAM wildcards (``*``, ``?``); a grant is covered by the first rule whose function,
action and resource patterns all match it (:func:`disposition_of`). A grant covered by no rule is
*unjustified*: the report and tests/infra/test_permissions_by_use.py fail on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobsched.local.iam.policy import action_matches, resource_matches

if TYPE_CHECKING:
    from jobsched.local.iam.evaluation import Grant


@dataclass(frozen=True)
class Context:
    """What a rule may ask about the deployment and the recording."""

    used: frozenset[tuple[str, str, str]]  # (function, action pattern, resource pattern) some call used
    consumed: frozenset[tuple[str, str]]  # (function, queue ARN) of its event source mappings

    def used_on(self, function: str, resource: str) -> bool:
        return any(f == function and r == resource for f, _, r in self.used)


def _queue_kind(resource: str) -> str | None:
    """``DEFAULT`` for ``...:<JOBSCHED_QUEUE_URL_DEFAULT>``: a priority queue named by the environment."""
    marker = ":<JOBSCHED_QUEUE_URL_"
    return resource.split(marker, 1)[1].rstrip(">") if marker in resource else None


@dataclass(frozen=True)
class Disposition:
    functions: str
    action: str
    resource: str
    kind: str
    reason: str
    #: Where the rule applies, beyond its patterns: "bundle": the function used another action of the
    #: grant on the same resource; "table": the function used the table whose indexes these are;
    #: "mapping": the function consumes the queue through an event source mapping; "sibling-queue":
    #: the function made the same call on another priority's queue; "as-worker": another function
    #: running the worker's code (:data:`WORKER_CODE`) used the same grant; "worker-bundle": another of
    #: them used the resource.
    only: tuple[str, ...] = ()

    def covers(self, grant: Grant, context: Context) -> bool:
        if not (
            action_matches(self.functions, grant.function)
            and action_matches(self.action, grant.action)
            and (self.resource == "*" or resource_matches(self.resource, grant.resource))
        ):
            return False
        return not self.only or any(self._holds(condition, grant, context) for condition in self.only)

    @staticmethod
    def _holds(condition: str, grant: Grant, context: Context) -> bool:
        if condition == "bundle":
            return context.used_on(grant.function, grant.resource)
        if condition == "table":
            return context.used_on(grant.function, grant.resource.split("/index/")[0])
        if condition == "mapping":
            return (grant.function, grant.resource) in context.consumed
        if condition == "sibling-queue":
            return _queue_kind(grant.resource) is not None and any(
                f == grant.function
                and a == grant.action
                and _queue_kind(r) not in (None, _queue_kind(grant.resource))
                for f, a, r in context.used
            )
        if condition == "as-worker":
            return grant.function in WORKER_CODE and any(
                (other, grant.action, grant.resource) in context.used
                for other in WORKER_CODE
                if other != grant.function
            )
        if condition == "worker-bundle":
            return grant.function in WORKER_CODE and any(
                context.used_on(other, grant.resource) for other in WORKER_CODE if other != grant.function
            )
        raise ValueError(f"unknown condition {condition!r}")


#: The functions that run the worker's code on runs: the three worker functions (infra/workers.py) and
#: the container pool's loop (infra/containers.py); any run may reach any of them.
WORKER_CODE = ("worker", "worker_high", "worker_long", "container_worker")
ANY_TABLE = "arn:aws:dynamodb:*:*:table/*"
ANY_QUEUE = "arn:aws:sqs:*:*:*"
RULES: tuple[Disposition, ...] = (
    Disposition(
        "*",
        "logs:*",
        "arn:aws:logs:*",
        "platform",
        "Lambda writes the function's log lines to its log group with the execution role.",
    ),
    Disposition(
        "*",
        "xray:*",
        "*",
        "platform",
        "Lambda's active tracing sends the function's trace segments with the execution role.",
    ),
    Disposition(
        "*",
        "sqs:ReceiveMessage",
        ANY_QUEUE,
        "platform",
        "The event source mapping receives the consumed queue's messages with the function's role.",
        only=("mapping",),
    ),
    Disposition(
        "*",
        "sqs:DeleteMessage",
        ANY_QUEUE,
        "platform",
        "The event source mapping deletes a batch's handled messages with the function's role.",
        only=("mapping",),
    ),
    Disposition(
        "*",
        "sqs:GetQueueAttributes",
        ANY_QUEUE,
        "platform",
        "The event source mapping reads the consumed queue's attributes with the function's role "
        "(CDK's grant_consume_messages includes it; the container loop's grant is the same).",
        only=("mapping",),
    ),
    Disposition(
        "*",
        "sqs:ChangeMessageVisibility",
        ANY_QUEUE,
        "platform",
        "The event source mapping (ReportBatchItemFailures) re-times a failed record's message with "
        "the function's role.",
        only=("mapping",),
    ),
    Disposition(
        "*",
        "sqs:GetQueueUrl",
        ANY_QUEUE,
        "cdk-grant",
        "Part of CDK's grant_send_messages / grant_consume_messages; the code is given queue URLs "
        "and never looks one up.",
        only=("bundle", "mapping"),
    ),
    Disposition(
        "*",
        "dynamodb:GetRecords",
        ANY_TABLE,
        "cdk-grant",
        "CDK's grant_read_write_data adds the stream actions; no table has a stream, so they allow nothing.",
    ),
    Disposition(
        "*",
        "dynamodb:GetShardIterator",
        ANY_TABLE,
        "cdk-grant",
        "CDK's grant_read_write_data adds the stream actions; no table has a stream, so they allow nothing.",
    ),
    Disposition(
        "*",
        "dynamodb:*",
        ANY_TABLE + "/index/*",
        "cdk-grant",
        "CDK's grant_read_write_data grants its actions on every index of a table the function uses; "
        "this function reads the table by its key, not through an index.",
        only=("table",),
    ),
    Disposition(
        "*",
        "dynamodb:*",
        ANY_TABLE,
        "cdk-grant",
        "Part of CDK's grant_read_write_data (read and write data actions on the table and its indexes) "
        "whose other actions the function (or another running the worker's code) uses on the same table.",
        only=("bundle", "worker-bundle"),
    ),
    Disposition(
        "*",
        "kms:*",
        "arn:aws:kms:*",
        "key",
        "Granted on the stack's one key by CDK's table grant (Decrypt, DescribeKey, Encrypt, ReEncrypt*, "
        "GenerateDataKey*) or by the SQS/S3 grants' exact key actions; AWS calls KMS with the caller's "
        "credentials, which a recording on moto cannot see.",
        only=("bundle",),
    ),
    Disposition(
        "*",
        "sqs:*",
        ANY_QUEUE,
        "path",
        "Runs go to the queue of their priority; the function made the same call on another priority's "
        "queue (which priorities the tests' jobs have is test data, not code).",
        only=("sibling-queue",),
    ),
    Disposition(
        "*worker*",
        "*",
        "*",
        "path",
        "Worker, WorkerHigh, WorkerLong and the container pool's loop run the same worker code on the "
        "runs of their queues, and a run may do whatever a run of another queue does (retry, outputs, "
        "effects, a chunked start, a DAG node's children); another of them used this grant.",
        only=("as-worker",),
    ),
    Disposition(
        "api",
        "s3:GetObject",
        "arn:aws:s3:::<JOBSCHED_BUCKET>/*",
        "path",
        "GET /runs/{id} reads a run's output from S3 when it was over the 4 KiB inline limit "
        "(jobsched/aws/outputs.py); no recorded test reads such an output through the API function.",
    ),
    Disposition(
        "*worker*",
        "s3:PutObject",
        "arn:aws:s3:::<JOBSCHED_BUCKET>/*",
        "path",
        "A run's output over the 4 KiB inline limit, and a chunk's output, is written to S3 "
        "(jobsched/aws/outputs.py); tested through the worker service (tests/aws/test_worker.py, "
        "test_retention.py), while no handler driven through the worker function in the suite returns "
        "one that large.",
    ),
    Disposition(
        "*worker*",
        "s3:GetObject",
        "arn:aws:s3:::<JOBSCHED_BUCKET>/*",
        "path",
        "A chunked job's completion reads the chunk outputs stored in S3 (over 4 KiB, "
        "jobsched/long_jobs/chunk_runner.py); chunked jobs are tested through the services, not a function.",
    ),
    Disposition(
        "*",
        "sns:Publish",
        "*",
        "path",
        "Dead-letter notifications to a team's SNS topic (the worker's, and the sweeper's for those still "
        "owed; the dispatcher's 80 % budget warnings, decision 0062): the end-to-end notification test "
        "uses a webhook; the SNS publish is tested through the service (tests/aws/test_notifications.py), "
        "not a function.",
    ),
    Disposition(
        "*worker*",
        "states:*",
        "arn:aws:states:*",
        "path",
        "Chunked jobs (start, describe, task responses and heartbeats, stop on cancel) are tested through "
        "the services against moto's Step Functions (tests/aws/test_chunked*.py); no recorded test runs "
        "one through the worker function.",
    ),
    Disposition(
        "*",
        "sqs:GetQueueAttributes",
        ANY_QUEUE,
        "path",
        "Read only when needed: the API's at-once dispatch and the dispatcher apply backpressure to "
        "default/low when a limit is set for that priority; the sweeper checks the backlog before "
        "declaring a run stranded (jobsched/services/backpressure.py, sweeper.py).",
    ),
    Disposition(
        "*worker*",
        "sqs:SendMessage",
        "arn:aws:sqs:*:*:<JOBSCHED_QUEUE_URL_*>",
        "path",
        "A retry re-sends the run to its own priority's queue, a DAG node's end sends its children to "
        "theirs, a freed limit slot makes a waiter's message visible in whichever queue it waits "
        "(infra/workers.py); which of these the tests reached on which queue is test data.",
    ),
    Disposition(
        "*worker*",
        "sqs:ChangeMessageVisibility",
        "arn:aws:sqs:*:*:<JOBSCHED_QUEUE_URL_*>",
        "path",
        "A retry re-sends the run to its own priority's queue, a DAG node's end sends its children to "
        "theirs, a freed limit slot makes a waiter's message visible in whichever queue it waits "
        "(infra/workers.py); which of these the tests reached on which queue is test data.",
    ),
    Disposition(
        "capacity",
        "ecs:*Service*",
        "arn:aws:ecs:*:*:service/*",
        "platform",
        "Application Auto Scaling checks that the caller of RegisterScalableTarget may describe and update "
        "the ECS service it targets (its 'permissions validation for API calls on target resources'); the "
        "capacity function makes no ECS call itself (infra/capacity.py).",
    ),
    Disposition(
        "capacity",
        "lambda:*ProvisionedConcurrencyConfig",
        "arn:aws:lambda:*:*:function:*:live",
        "path",
        "Provisioned concurrency on the worker's alias (capacity_max_provisioned): moto 5.2.6 answers "
        "Get/Put/DeleteProvisionedConcurrencyConfig '404 Not yet implemented', so no test reaches them on "
        "moto; the plan and the service's use of them run on the fake (tests/contract/test_pool_capacity.py, "
        "tests/services/test_forecast_capacity.py) and the grant's one resource is checked in "
        "tests/infra/test_capacity.py.",
    ),
)


def disposition_of(grant: Grant, context: Context) -> Disposition | None:
    """The first rule covering ``grant``, None when none does (an unjustified grant)."""
    return next((rule for rule in RULES if rule.covers(grant, context)), None)
