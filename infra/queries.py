"""CloudWatch Logs Insights saved queries (``AWS::Logs::QueryDefinition``), in the console's folder
``<stack>/``: a run's lines, errors by job, today's dead letters, the slowest runs.

They read the keys the functions really write (Powertools JSON, jobsched/runtime/observability.py):
every line of a run carries ``job_id``, ``run_id``, ``attempt`` and ``tenant``; the worker's (and the
container tasks') ``run delivery handled`` line adds ``outcome`` and the outcome's detail —
``duration_seconds`` and ``pool`` for an attempt that ran, ``reason`` and ``error`` for a dead letter
or a retry; the DLQ consumer's ``poison message handled`` line has ``outcome`` too; the sweeper's
``declared stranded and dead-lettered`` line names the run in its message. A saved query keeps no time
range: "today" is the range the console is set to (docs/operations.md, "Saved queries").
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from jobsched.api.run_logs import insights_query

#: What a saved query for one run filters on until the operator types the run's id in its place.
RUN_ID_PLACEHOLDER = "<run id>"
#: The functions whose lines each query reads (keys of the stack's ``functions``; the worker functions
#: share one log group, which the container tasks write to too).
RUN_FUNCTIONS = ("worker",)
FAILURE_FUNCTIONS = ("worker", "dlq_consumer", "sweeper")

ERRORS_BY_JOB = (
    "fields @timestamp, tenant, job_id, outcome, error"
    ' | filter outcome in ["retrying", "dead_lettered"] or level = "ERROR"'
    " | stats count(*) as errors, latest(error) as last_error by tenant, job_id"
    " | sort errors desc | limit 100"
)
DEAD_LETTERS = (
    "fields @timestamp, tenant, job_id, run_id, attempt, reason, error, @message"
    ' | filter outcome = "dead_lettered" or message like /dead-lettered/'
    " | sort @timestamp desc | limit 1000"
)
SLOWEST_RUNS = (
    "fields @timestamp, duration_seconds, pool, tenant, job_id, run_id, attempt, outcome"
    " | filter ispresent(duration_seconds)"
    " | sort duration_seconds desc | limit 50"
)


class SavedQueries(Construct):
    """``definitions``: title -> its ``AWS::Logs::QueryDefinition``."""

    def __init__(self, scope: Construct, construct_id: str, *, functions: dict[str, lambda_.IFunction]):
        super().__init__(scope, construct_id)
        folder = cdk.Stack.of(self).stack_name
        queries = {
            "a run's lines": (insights_query(RUN_ID_PLACEHOLDER), RUN_FUNCTIONS),
            "errors by job": (ERRORS_BY_JOB, FAILURE_FUNCTIONS),
            "dead letters (set the range to today)": (DEAD_LETTERS, FAILURE_FUNCTIONS),
            "slowest runs": (SLOWEST_RUNS, RUN_FUNCTIONS),
        }
        # The L1: the L2's QueryString builds a query from its parts and takes no query text.
        self.definitions: dict[str, logs.CfnQueryDefinition] = {}
        for index, (title, (query, names)) in enumerate(queries.items()):
            groups = {_log_group_of(functions[name]).log_group_name: None for name in names}
            self.definitions[title] = logs.CfnQueryDefinition(
                self,
                f"Query{index}",
                name=f"{folder}/{title}",
                query_string=query,
                log_group_names=list(groups),
            )


def _log_group_of(function: lambda_.IFunction) -> logs.ILogGroup:
    if not isinstance(function, lambda_.Function):
        raise TypeError(f"{function.node.path} is not a lambda_.Function: it has no log group to query")
    return function.log_group
