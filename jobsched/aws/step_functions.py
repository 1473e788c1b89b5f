"""Every Step Functions call of chunked jobs (client injected, metered when a meter is given).

The answers the long jobs act on are returned, not raised: a start refused as a duplicate
(``ExecutionAlreadyExists``: the run's execution exists, the start is not repeated), a task token Step
Functions no longer waits on (:data:`GONE_CODES`: answered before, timed out), a stop of an execution
that already ended. Anything else raises :class:`~jobsched.aws.errors.AwsRefused` or
:class:`~jobsched.aws.errors.AwsUnreachable`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from jobsched.aws.errors import AwsRefused, aws_call, is_sdk_client
from jobsched.aws.sizing import Meter
from jobsched.ports.state_machine import StateMachine, TaskGone

__all__ = ["GONE_CODES", "StepFunctions", "TaskGone"]

logger = logging.getLogger(__name__)

#: Step Functions' answers for a task token it no longer waits on.
GONE_CODES = frozenset({"TaskDoesNotExist", "TaskTimedOut", "InvalidToken"})


class StepFunctions:
    """Starts, describes and stops executions and answers task tokens: the real
    :class:`jobsched.ports.state_machine.StateMachine`."""

    def __init__(self, client: Any, meter: Meter | None = None):
        self.client = client
        self.meter = meter

    @classmethod
    def of(cls, client_or_adapter: Any) -> StateMachine:
        """``client_or_adapter`` itself when it is an adapter (or a fake of the port), else the adapter
        over that boto3 client."""
        return cls(client_or_adapter) if is_sdk_client(client_or_adapter) else client_or_adapter

    def _call(self, operation: str, fn: Any, **kwargs: Any) -> Any:
        try:
            return aws_call(fn, **kwargs)
        finally:
            if self.meter is not None:
                self.meter.record_request("states", operation)

    def start_execution(self, state_machine_arn: str, name: str, input_json: str) -> bool:
        """Start the execution ``name``; False when one of that name exists already (not started)."""
        try:
            self._call(
                "StartExecution",
                self.client.start_execution,
                stateMachineArn=state_machine_arn,
                name=name,
                input=input_json,
            )
        except AwsRefused as exc:
            if exc.code != "ExecutionAlreadyExists":
                raise
            return False
        return True

    def describe_execution(self, execution_arn: str) -> dict[str, Any]:
        """``DescribeExecution``: ``status``, ``input``, ``output``, ``error``, ``cause``..."""
        return dict(
            self._call("DescribeExecution", self.client.describe_execution, executionArn=execution_arn)
        )

    def stop_execution(self, execution_arn: str, error: str, cause: str) -> bool:
        """Stop an execution; False when Step Functions refused (already closed, or unknown)."""
        try:
            self._call(
                "StopExecution",
                self.client.stop_execution,
                executionArn=execution_arn,
                error=error,
                cause=cause,
            )
        except AwsRefused:
            return False
        return True

    def send_task_heartbeat(self, task_token: str) -> None:
        """``SendTaskHeartbeat``; :class:`TaskGone` when the task is no longer waited on."""
        try:
            self._call("SendTaskHeartbeat", self.client.send_task_heartbeat, taskToken=task_token)
        except AwsRefused as exc:
            if exc.code in GONE_CODES:
                raise TaskGone(exc.message or exc.code) from exc
            raise

    def send_task_success(self, task_token: str, output: Any) -> bool:
        """``SendTaskSuccess`` with ``output`` as JSON; False when the task is gone."""
        try:
            self._call(
                "SendTaskSuccess",
                self.client.send_task_success,
                taskToken=task_token,
                output=json.dumps(output, separators=(",", ":")),
            )
        except AwsRefused as exc:
            return _gone(exc)
        return True

    def send_task_failure(self, task_token: str, error: str, cause: str) -> bool:
        """``SendTaskFailure``; False when the task is gone."""
        try:
            self._call(
                "SendTaskFailure",
                self.client.send_task_failure,
                taskToken=task_token,
                error=error,
                cause=cause,
            )
        except AwsRefused as exc:
            return _gone(exc)
        return True


def _gone(exc: AwsRefused) -> bool:
    if exc.code in GONE_CODES:
        logger.info("task token no longer valid: %s", exc.message)
        return False
    raise exc
