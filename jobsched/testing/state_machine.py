"""An in-memory :class:`jobsched.ports.state_machine.StateMachine`: executions and task tokens.

It does not run a workflow definition: a test plays Step Functions' part, issuing task tokens
(:meth:`InMemoryStateMachine.issue_token`) and ending executions (:meth:`InMemoryStateMachine.finish`).
What the long jobs rely on is kept: a start with the name of a running execution and the same input
answers that execution (started, as Step Functions does), with another input or after the execution
ended it starts nothing (``ExecutionAlreadyExists``: False); a task token is answered once, after which
an answer is refused (False) and a heartbeat raises :class:`~jobsched.ports.state_machine.TaskGone`.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from jobsched.aws.errors import refused
from jobsched.core.clock import Clock
from jobsched.ports.state_machine import TaskGone

__all__ = ["InMemoryStateMachine"]


@dataclass
class Execution:
    arn: str
    name: str
    state_machine_arn: str
    input: str
    status: str = "RUNNING"
    output: str | None = None
    error: str | None = None
    cause: str | None = None
    answers: list[tuple[str, Any]] = field(default_factory=list)  # ("success"|"failure", detail)


class InMemoryStateMachine:
    """Executions of any state machine ARN, in memory."""

    def __init__(self, clock: Clock | None = None):
        self.clock = clock
        self.executions: dict[str, Execution] = {}
        self._tokens: dict[str, str] = {}  # open token -> execution ARN
        self.heartbeats: list[str] = []
        self._lock = threading.Lock()

    @staticmethod
    def execution_arn(state_machine_arn: str, name: str) -> str:
        return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":" + name

    def start_execution(self, state_machine_arn: str, name: str, input_json: str) -> bool:
        json.loads(input_json)  # Step Functions refuses input that is not JSON
        arn = self.execution_arn(state_machine_arn, name)
        with self._lock:
            existing = self.executions.get(arn)
            if existing is not None:
                return existing.status == "RUNNING" and existing.input == input_json
            self.executions[arn] = Execution(arn, name, state_machine_arn, input_json)
            return True

    def describe_execution(self, execution_arn: str) -> dict[str, Any]:
        with self._lock:
            execution = self.executions.get(execution_arn)
            if execution is None:
                raise refused(
                    "ExecutionDoesNotExist",
                    f"Execution Does Not Exist: '{execution_arn}'",
                    "DescribeExecution",
                )
            answer: dict[str, Any] = {
                "executionArn": execution.arn,
                "stateMachineArn": execution.state_machine_arn,
                "name": execution.name,
                "status": execution.status,
                "input": execution.input,
            }
            for key in ("output", "error", "cause"):
                if getattr(execution, key) is not None:
                    answer[key] = getattr(execution, key)
            return answer

    def stop_execution(self, execution_arn: str, error: str, cause: str) -> bool:
        with self._lock:
            execution = self.executions.get(execution_arn)
            if execution is None:
                return False
            execution.status, execution.error, execution.cause = "ABORTED", error, cause
            for token in [t for t, arn in self._tokens.items() if arn == execution_arn]:
                del self._tokens[token]
            return True

    def _answer(self, task_token: str, kind: str, detail: Any) -> bool:
        with self._lock:
            arn = self._tokens.pop(task_token, None)
            if arn is None:
                return False
            self.executions[arn].answers.append((kind, detail))
            return True

    def send_task_heartbeat(self, task_token: str) -> None:
        with self._lock:
            if task_token not in self._tokens:
                raise TaskGone("Task Does Not Exist")
            self.heartbeats.append(task_token)

    def send_task_success(self, task_token: str, output: Any) -> bool:
        return self._answer(task_token, "success", output)

    def send_task_failure(self, task_token: str, error: str, cause: str) -> bool:
        return self._answer(task_token, "failure", {"Error": error, "Cause": cause})

    # --- Step Functions' part, played by a test ----------------------------------------------------

    def issue_token(self, execution_arn: str) -> str:
        """A task token the execution now waits on (as a ``waitForTaskToken`` state would send)."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            if execution_arn not in self.executions:
                raise KeyError(execution_arn)
            self._tokens[token] = execution_arn
        return token

    def finish(
        self,
        execution_arn: str,
        status: str,
        *,
        output: Any = None,
        error: str | None = None,
        cause: str | None = None,
    ) -> None:
        """End an execution (``SUCCEEDED`` with ``output``, or ``FAILED``/``TIMED_OUT`` with an error)."""
        with self._lock:
            execution = self.executions[execution_arn]
            execution.status = status
            execution.output = None if output is None else json.dumps(output, separators=(",", ":"))
            execution.error, execution.cause = error, cause
