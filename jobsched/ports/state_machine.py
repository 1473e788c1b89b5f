"""The Step Functions calls of chunked jobs, by what they do.

What the long jobs rely on, kept by :class:`jobsched.aws.step_functions.StepFunctions` and by
:class:`jobsched.testing.InMemoryStateMachine`:

* an execution is named after its run: a second start with the same name starts nothing
  (:meth:`StateMachine.start_execution` answers False), so a duplicate delivery never runs a run twice;
* a task token is answered once: a second answer, or a heartbeat, for a token no longer waited on is
  refused (``send_task_*`` answer False, a heartbeat raises :class:`TaskGone`);
* stopping an execution that already ended answers False.
"""

from __future__ import annotations

from typing import Any, Protocol


class TaskGone(Exception):
    """Raised by :meth:`StateMachine.send_task_heartbeat` when Step Functions no longer waits on the
    task (answered before, timed out, an unknown token): the step's result would be refused."""


class StateMachine(Protocol):
    """Starts, describes and stops executions; answers task tokens."""

    def start_execution(self, state_machine_arn: str, name: str, input_json: str) -> bool: ...

    def describe_execution(self, execution_arn: str) -> dict[str, Any]: ...

    def stop_execution(self, execution_arn: str, error: str, cause: str) -> bool: ...

    def send_task_heartbeat(self, task_token: str) -> None: ...

    def send_task_success(self, task_token: str, output: Any) -> bool: ...

    def send_task_failure(self, task_token: str, error: str, cause: str) -> bool: ...
