"""Calling a function the way Lambda does: a handler ``(event, context)`` and a context object.

The embedded mode resolves the handlers named in :data:`jobsched.runtime.resources.FUNCTIONS` by import path
(after the environment is set, so they build their clients exactly as on AWS) and gives each
invocation a small but real context whose remaining time counts down from the function's timeout.

Lambda's time limit is enforced: a function's timeout is its spec's, capped by the embedded mode's
limit (``jobsched dev --lambda-time-limit``, default 900 s: ``resources.LAMBDA_TIME_LIMIT_SECONDS``).
The context's remaining time counts down from it, and an invocation still running then ends as Lambda
ends it: the line ``<request id> Task timed out after N.00 seconds`` is logged and the caller gets
:class:`TaskTimedOut` (a poller then deletes none of the batch's records: they come back after their
visibility timeout). Python cannot stop a thread, so the handler's own thread runs on in the
background, its writes still fenced by the run's lease; Lambda would have frozen it.
"""

from __future__ import annotations

import contextvars
import importlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from jobsched.runtime import observability as obs
from jobsched.runtime import resources
from jobsched.targets.executor import KeptThreads

Handler = Callable[[Any, Any], Any]

log = logging.getLogger(__name__)

#: The threads invocations run on (kept: a thread start per invocation cost the worker slots time).
_INVOCATIONS = KeptThreads("jobsched-invocation")


class TaskTimedOut(Exception):
    """An invocation ran past its function's timeout (what Lambda reports as ``Task timed out``)."""


class LambdaContext:
    """The parts of the Lambda context object that handlers and Powertools use."""

    def __init__(self, function_name: str, timeout_seconds: float, memory_mb: int = 128):
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self.memory_limit_in_mb = memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = f"local/{self.aws_request_id}"
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def function_spec(name: str) -> resources.FunctionSpec:
    """The spec of the function called ``name`` in :data:`jobsched.runtime.resources.FUNCTIONS`."""
    for spec in resources.FUNCTIONS:
        if spec.name == name:
            return spec
    raise KeyError(f"no function named {name!r} in jobsched.runtime.resources.FUNCTIONS")


def load_handler(path: str) -> Handler:
    """Import ``module.attribute`` (a Lambda handler string) and return the callable."""
    module_name, _, attribute = path.rpartition(".")
    return getattr(importlib.import_module(module_name), attribute)


class Function:
    """A handler bound to its spec: ``invoke(event)`` is one Lambda invocation, ended at the function's
    timeout (the spec's, capped by ``time_limit_seconds``: Lambda's limit, or the embedded mode's)."""

    def __init__(
        self,
        spec: resources.FunctionSpec,
        handler: Handler,
        *,
        time_limit_seconds: float = resources.LAMBDA_TIME_LIMIT_SECONDS,
    ):
        self.spec = spec
        self.handler = handler
        self.timeout_seconds = min(float(spec.timeout_seconds), float(time_limit_seconds))

    def new_context(self) -> LambdaContext:
        return LambdaContext(self.spec.name, self.timeout_seconds, self.spec.memory_mb)

    @property
    def service(self) -> str:
        """The service its log lines name, as the function's own Powertools logger does on Lambda
        (``jobsched-dispatcher``, ``jobsched-dlq-consumer``, ...)."""
        return "jobsched-" + self.spec.name.replace("_", "-")

    def _handle(self, event: Any, context: LambdaContext) -> Any:
        with obs.function_service(self.service):
            return self.handler(event, context)

    def invoke(self, event: Any) -> Any:
        """The handler's answer, or :class:`TaskTimedOut` once the function's timeout has passed."""
        context = self.new_context()
        outcome: dict[str, Any] = {}
        call = contextvars.copy_context()  # what the caller set (its lane, its log keys) goes along

        def invocation() -> None:
            try:
                outcome["value"] = call.run(self._handle, event, context)
            except BaseException as exc:  # re-raised in the caller's thread, as a direct call would
                outcome["error"] = exc

        if not _INVOCATIONS.run(invocation).wait(self.timeout_seconds):
            message = f"{context.aws_request_id} Task timed out after {self.timeout_seconds:.2f} seconds"
            log.error(message, extra={"function": self.spec.name})
            raise TaskTimedOut(message)
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")
