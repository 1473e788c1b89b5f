"""What only the fakes do (moto has no TTL sweep, and plays no Step Functions tokens): the TTL sweep by
the clock, and task tokens answered once."""

from __future__ import annotations

import pytest

from jobsched.core.clock import FakeClock
from jobsched.ports.state_machine import TaskGone
from jobsched.testing import InMemoryStateMachine, in_memory_aws
from tests.aws.conftest import T0


def test_the_ttl_sweep_removes_expired_items_at_the_clocks_instant():
    aws = in_memory_aws(clock=FakeClock(T0))
    leases = aws.settings.leases_table
    now = int(T0.timestamp())
    aws.tables.put(leases, {"lease_key": "soon", "expires_at": now + 60})
    aws.tables.put(leases, {"lease_key": "never"})
    assert aws.tables.sweep_ttl() == 0
    aws.clock.advance(seconds=61)
    assert aws.tables.sweep_ttl() == 1
    assert [i["lease_key"] for i in aws.tables.items(leases)] == ["never"]


def test_a_task_token_is_answered_once_and_then_gone():
    sfn = InMemoryStateMachine()
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:chunks"
    assert sfn.start_execution(arn, "run-1", '{"a": 1}') is True
    assert sfn.start_execution(arn, "run-1", '{"a": 1}') is True  # same name and input, still running
    assert sfn.start_execution(arn, "run-1", '{"a": 2}') is False  # ExecutionAlreadyExists
    execution = sfn.execution_arn(arn, "run-1")
    token = sfn.issue_token(execution)
    sfn.send_task_heartbeat(token)
    assert sfn.send_task_success(token, {"ok": True}) is True
    assert sfn.send_task_success(token, {"ok": True}) is False
    with pytest.raises(TaskGone):
        sfn.send_task_heartbeat(token)
    sfn.finish(execution, "SUCCEEDED", output={"result": {}})
    assert sfn.start_execution(arn, "run-1", '{"a": 1}') is False
    assert sfn.describe_execution(execution)["status"] == "SUCCEEDED"


def test_an_update_with_overlapping_paths_is_refused_as_dynamodb_refuses_it():
    """DynamoDB refuses an update whose actions touch overlapping document paths ("Two document paths
    overlap with each other"), a list replaced beside one of its elements included
    (amzn/smoke-dynamodb#102: `SET l[0].x = ..., l = list_append(l, ...)` fails validation on
    DynamoDB). moto 5.2 refuses `SET m = :x, m.b = :y` but lets the list case through, so this is not
    in the contract suite; the fake refuses both, and SET past a list's end appends, as DynamoDB does."""
    from jobsched.aws.errors import AwsRefused

    aws = in_memory_aws(clock=FakeClock(T0))
    leases = aws.settings.leases_table
    aws.tables.put(leases, {"lease_key": "k", "l": [{"a": 1}], "m": {"b": 1}})
    for expression, values in [
        ("SET l = list_append(l, :e), l[0].x = :v", {":e": [{"a": 2}], ":v": 1}),
        ("SET m = :x, m.b = :v", {":x": {}, ":v": 1}),
    ]:
        with pytest.raises(AwsRefused) as error:
            aws.tables.update(leases, {"lease_key": "k"}, expression, values=values)
        assert error.value.code == "ValidationException"
    new = aws.tables.update(
        leases, {"lease_key": "k"}, "SET l[1] = :e, l[0].x = :v", values={":e": {"a": 2}, ":v": 1}
    )
    assert new["l"] == [{"a": 1, "x": 1}, {"a": 2}]
