"""Calling a function the way Lambda does: a handler ``(event, context)`` and a context object.

The embedded mode resolves the handlers named in :data:`jobsched.runtime.resources.FUNCTIONS` by import path
(after the environment is set, so they build their clients exactly as on AWS) and gives each
invocation a small but real context whose remaining time counts down from the function's timeout.
"""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable
from typing import Any

from jobsched.runtime import resources

Handler = Callable[[Any, Any], Any]


class LambdaContext:
    """The parts of the Lambda context object that handlers and Powertools use."""

    def __init__(self, function_name: str, timeout_seconds: int, memory_mb: int = 128):
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
    """A handler bound to its spec: ``invoke(event)`` is one Lambda invocation."""

    def __init__(self, spec: resources.FunctionSpec, handler: Handler):
        self.spec = spec
        self.handler = handler

    def new_context(self) -> LambdaContext:
        return LambdaContext(self.spec.name, self.spec.timeout_seconds, self.spec.memory_mb)

    def invoke(self, event: Any) -> Any:
        return self.handler(event, self.new_context())
