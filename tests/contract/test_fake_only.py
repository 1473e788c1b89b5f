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
