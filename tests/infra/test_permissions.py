"""Least privilege: no wildcard actions, no AWS-managed policies, per-function grants."""

from __future__ import annotations

from typing import Any

import pytest

from jobsched.runtime.resources import QUEUES


def _statements(synth, role: Any) -> list[dict]:
    """Every statement of the policies attached to ``role``."""
    role_id = synth.logical_id(role)
    statements = []
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _actions(synth, function_name: str) -> set[str]:
    actions: set[str] = set()
    for statement in _statements(synth, synth.stack.functions[function_name].role):
        value = statement["Action"]
        actions |= {value} if isinstance(value, str) else set(value)
    return actions


def _resources_for(synth, function_name: str, action: str) -> list[Any]:
    found = []
    for statement in _statements(synth, synth.stack.functions[function_name].role):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if action in actions:
            resources = statement["Resource"]
            found += resources if isinstance(resources, list) else [resources]
    return found


def test_no_policy_statement_uses_a_wildcard_action(synth):
    for logical_id, policy in synth.resources("AWS::IAM::Policy").items():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert not [a for a in actions if "*" in a], f"{logical_id}: {actions}"


def test_no_role_uses_an_aws_managed_policy(synth):
    for logical_id, role in synth.resources("AWS::IAM::Role").items():
        assert not role["Properties"].get("ManagedPolicyArns"), logical_id


def _arn_of(synth, construct) -> dict:
    return {"Fn::GetAtt": [synth.logical_id(construct), "Arn"]}


WORKERS = ["worker", "worker_high", "worker_long"]


@pytest.mark.parametrize("function_name", WORKERS)
def test_worker_may_only_read_a_job_and_update_it_in_the_jobs_table(synth, function_name):
    # Given the run message carries the job's snapshot (and long retries re-send the message itself),
    # and a run queued ahead that the worker skips for its tenant's budget rewinds its job (decision
    # 0062, amended) / Then a worker's role names the Jobs table only for GetItem, BatchGetItem (a
    # large payload's body item) and UpdateItem: no put, delete, query or scan
    from jobsched.runtime.resources import JOBS_TABLE

    jobs = synth.logical_id(synth.stack.tables.table(JOBS_TABLE))
    allowed: set[str] = set()
    for statement in _statements(synth, synth.stack.functions[function_name].role):
        if jobs in str(statement["Resource"]):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            allowed.update(actions)
    assert allowed == {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"}


TASK_RESPONSES = ("states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat")


def test_worker_may_answer_task_tokens_of_the_state_machine_only(synth):
    state_machine = {"Ref": synth.logical_id(synth.stack.long_jobs.state_machine)}
    for action in TASK_RESPONSES:
        assert _resources_for(synth, "worker_long", action) == [state_machine]


def test_the_three_workers_may_do_the_same_but_consume_different_queues(synth):
    # Given one worker code for the three functions / Then their roles allow the same actions but for
    # the chunk tasks' (which arrive on the long queue, consumed by the long worker only: decision
    # 0038); the consume-only actions (ReceiveMessage, DeleteMessage) name each one's own queues
    chunk_only = {*TASK_RESPONSES, "states:StopExecution"}
    assert _actions(synth, "worker_long") - chunk_only == _actions(synth, "worker_high")
    assert _actions(synth, "worker") == _actions(synth, "worker_high")
    assert chunk_only <= _actions(synth, "worker_long")
    queue = {
        kind: _arn_of(synth, synth.stack.queues.queue(kind)) for kind in ("high", "default", "low", "long")
    }
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage"):
        assert _resources_for(synth, "worker_high", action) == [queue["high"]]
        assert _resources_for(synth, "worker_long", action) == [queue["long"]]
        assert queue["high"] not in _resources_for(synth, "worker", action)
        assert {str(r) for r in _resources_for(synth, "worker", action)} == {
            str(queue[k]) for k in ("default", "low")
        }


def test_dispatcher_may_read_queue_attributes_for_backpressure(synth):
    # Given backpressure reads the depth of default and low / Then the dispatcher may read their
    # attributes (and only theirs: decision 0038), and sends to the three priority queues
    read = {str(r) for r in _resources_for(synth, "dispatcher", "sqs:GetQueueAttributes")}
    assert {str(_arn_of(synth, synth.stack.queues.queue(kind))) for kind in ("default", "low")} == read
    assert "sqs:SendMessage" in _actions(synth, "dispatcher")


@pytest.mark.parametrize("function_name", ["api", "dispatcher", "sweeper"])
def test_no_sender_may_look_up_queue_urls(synth, function_name):
    # The functions get queue URLs from their environment (decision 0038: no call ever looked one up;
    # the workers keep it only through CDK's consume grant of their event source mappings)
    assert "sqs:GetQueueUrl" not in _actions(synth, function_name)


@pytest.mark.parametrize("function_name", ["api", "dispatcher", "sweeper"])
def test_every_sender_of_runs_may_send_to_every_pools_queue(synth, function_name):
    # Given runs on the lambda, long and container pools (issue 30) / Then whatever sends a run (the
    # dispatcher, the API's run-now and replay, the sweeper's re-send) may send to each pool's queue,
    # and to no dead-letter queue
    sends = {str(r) for r in _resources_for(synth, function_name, "sqs:SendMessage")}
    run_queues = {str(_arn_of(synth, synth.stack.queues.queue(spec.kind))) for spec in QUEUES}
    assert run_queues <= sends
    assert not {str(_arn_of(synth, synth.stack.queues.dlq(spec.kind))) for spec in QUEUES} & sends


def test_dlq_consumer_touches_only_the_runs_table(synth):
    from jobsched.runtime.resources import RUNS_TABLE, TABLES

    tables = synth.stack.tables
    touched = [r for r in _resources_for(synth, "dlq_consumer", "dynamodb:PutItem") if "Fn::GetAtt" in r]
    assert touched == [_arn_of(synth, tables.table(RUNS_TABLE))]
    others = [_arn_of(synth, tables.table(t)) for t in TABLES if t is not RUNS_TABLE]
    assert not [o for o in others if o in _resources_for(synth, "dlq_consumer", "dynamodb:GetItem")]


def test_api_reads_payload_objects_but_cannot_write_them(synth):
    actions = _actions(synth, "api")
    assert "s3:GetObject" in actions
    assert "s3:PutObject" not in actions


@pytest.mark.parametrize("function_name", ["api", "dispatcher", "dlq_consumer", "sweeper"])
def test_only_the_worker_answers_task_tokens(synth, function_name):
    assert "states:SendTaskSuccess" not in _actions(synth, function_name)


def test_worker_may_read_and_stop_executions_of_chunked_runs_only(synth):
    # Chunked runs: the worker reads an execution's result and stops the execution of a cancelled run;
    # both are scoped to executions of our state machine, and no other function may do either.
    for action in ("states:DescribeExecution", "states:StopExecution"):
        resources = _resources_for(synth, "worker_long", action)
        assert resources and all("execution" in str(r) for r in resources), resources
        for other in ("api", "dispatcher", "dlq_consumer", "sweeper"):
            assert action not in _actions(synth, other)


@pytest.mark.parametrize("function_name", ["api", "dispatcher"])
def test_functions_that_create_runs_may_batch_write_the_run_feed(synth, function_name):
    # The run feed (docs/decisions/0004) is written with BatchWriteItem on the Runs table
    from jobsched.runtime.resources import RUNS_TABLE

    runs = _arn_of(synth, synth.stack.tables.table(RUNS_TABLE))
    assert runs in _resources_for(synth, function_name, "dynamodb:BatchWriteItem")


# the dispatcher sends a tenant's 80 % budget warning (decision 0062)
@pytest.mark.parametrize("function_name", ["worker", "worker_high", "worker_long", "sweeper", "dispatcher"])
def test_the_functions_that_send_notifications_may_publish_to_the_allow_listed_topics_only(
    synth, function_name
):
    # Given the synthesis's notify_topic_arns allow-list / Then sns:Publish names exactly its patterns
    from tests.infra.conftest import NOTIFY_TOPIC_ARNS

    assert _resources_for(synth, function_name, "sns:Publish") == [NOTIFY_TOPIC_ARNS]


@pytest.mark.parametrize("function_name", ["api", "dlq_consumer"])
def test_functions_that_send_no_notification_cannot_publish(synth, function_name):
    assert "sns:Publish" not in _actions(synth, function_name)


def test_every_function_is_told_the_topic_allow_list(synth):
    from jobsched.runtime.resources import ENV_NOTIFY_TOPIC_ARNS
    from tests.infra.conftest import NOTIFY_TOPIC_ARNS

    for function in synth.resources("AWS::Lambda::Function").values():
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "JOBSCHED_RUNS_TABLE" in variables:
            assert variables[ENV_NOTIFY_TOPIC_ARNS] == NOTIFY_TOPIC_ARNS


@pytest.mark.parametrize("function_name", WORKERS)
def test_worker_may_update_the_leases_table_and_hide_messages(synth, function_name):
    # Given the limits' semaphores and buckets live in the Leases table, and a waiting run's message
    # is hidden (and a waiter's made visible) with ChangeMessageVisibility / Then the worker's role
    # has UpdateItem and GetItem on the Leases table (grant_read_write_data) and
    # ChangeMessageVisibility on every queue (a waiter may be in a queue the function does not consume)
    from jobsched.runtime.resources import LEASES_TABLE, QUEUES

    leases = _arn_of(synth, synth.stack.tables.table(LEASES_TABLE))
    for action in ("dynamodb:UpdateItem", "dynamodb:GetItem"):
        assert leases in _resources_for(synth, function_name, action)
    visibility = _resources_for(synth, function_name, "sqs:ChangeMessageVisibility")
    for spec in QUEUES:
        assert _arn_of(synth, synth.stack.queues.queue(spec.kind)) in visibility


def test_api_may_scan_the_jobs_table_and_the_dead_letter_index_for_handler_counts(synth):
    # GET /handlers?scope=all (decision 0049) scans the Jobs table and the Runs table's sparse
    # dead-letter index; draining marks and deploy-checks are items of the Leases table
    from jobsched.runtime.resources import JOBS_TABLE, LEASES_TABLE, RUNS_TABLE

    tables = synth.stack.tables
    scans = _resources_for(synth, "api", "dynamodb:Scan")
    assert _arn_of(synth, tables.table(JOBS_TABLE)) in scans
    runs_indexes = {"Fn::Join": ["", [_arn_of(synth, tables.table(RUNS_TABLE)), "/index/*"]]}
    assert runs_indexes in scans
    leases = _arn_of(synth, tables.table(LEASES_TABLE))
    assert leases in _resources_for(synth, "api", "dynamodb:GetItem")
    assert leases in _resources_for(synth, "api", "dynamodb:PutItem")


def test_the_permissions_reader_judges_the_container_loop_by_the_task_role(synth):
    # Given the synthesized template / When the permissions-by-use reader reads it (decision 0038)
    from jobsched.local.iam.template import read_roles

    roles = read_roles(synth.template)
    # Then WorkerLong is worker_long, and the container loop (container_worker) is the task definition,
    # judged by its task role (not the execution role), consuming the container queue
    assert roles.roles["worker_long"].logical_id == synth.logical_id(synth.stack.workers.long_worker)
    container = roles.roles["container_worker"]
    assert container.logical_id == synth.logical_id(synth.stack.containers.task_definition)
    actions = {action for statement in container.statements for action in statement.actions or ()}
    assert {"sqs:ReceiveMessage", "states:SendTaskSuccess", "dynamodb:PutItem"} <= actions
    assert not {a for a in actions if a.startswith(("ecr:", "logs:", "xray:"))}
    queue = "arn:aws:sqs:us-east-1:123456789012:<JOBSCHED_QUEUE_URL_CONTAINER>"
    assert ("container_worker", queue) in roles.consumed
