"""Local invocations end as Lambda's do: the context counts down from the function's timeout capped by
the embedded mode's Lambda time limit, and an invocation still running then is a ``Task timed out``."""

from __future__ import annotations

import importlib
import io
import json
import logging
import threading
from typing import Any

import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from jobsched.local.invoke import Function, TaskTimedOut, function_spec
from jobsched.runtime import resources
from jobsched.runtime.observability import RunKeysFilter


def test_the_context_counts_down_from_the_lambda_time_limit_when_it_is_below_the_functions_timeout() -> None:
    # Given the worker function (timeout 900 s) under a 3 s Lambda limit, and the api (29 s) under 900 s
    seen: list[int] = []
    worker = Function(
        function_spec("worker"),
        lambda e, c: seen.append(c.get_remaining_time_in_millis()),
        time_limit_seconds=3,
    )
    api = Function(function_spec("api"), lambda e, c: seen.append(c.get_remaining_time_in_millis()))
    # When each is invoked
    worker.invoke({})
    api.invoke({})
    # Then each context's remaining time starts from the smaller of the two
    assert (worker.timeout_seconds, api.timeout_seconds) == (3.0, 29.0)
    assert 2_000 < seen[0] <= 3_000 and 28_000 < seen[1] <= 29_000


def test_an_invocation_over_the_limit_ends_as_a_lambda_timeout(caplog: pytest.LogCaptureFixture) -> None:
    # Given a handler that runs past a 0.2 s limit
    release = threading.Event()

    def slow(event: Any, context: Any) -> dict:
        release.wait(10)
        return {"batchItemFailures": []}

    function = Function(function_spec("worker"), slow, time_limit_seconds=0.2)
    # When it is invoked
    with caplog.at_level(logging.ERROR, logger="jobsched.local.invoke"), pytest.raises(TaskTimedOut) as ended:
        function.invoke({"Records": []})
    release.set()
    # Then the caller gets a timeout (a poller deletes none of the batch) and Lambda's line is logged
    assert str(ended.value).endswith("Task timed out after 0.20 seconds")
    assert any(r.getMessage().endswith("Task timed out after 0.20 seconds") for r in caplog.records)


def test_a_handlers_answer_and_its_error_reach_the_caller_as_in_a_direct_call() -> None:
    def fails(event: Any, context: Any) -> None:
        raise ValueError("bad event")

    assert Function(function_spec("api"), lambda e, c: {"ok": e}).invoke(1) == {"ok": 1}
    with pytest.raises(ValueError, match="bad event"):
        Function(function_spec("api"), fails).invoke({})


def test_a_line_logged_in_an_invocation_names_that_functions_service() -> None:
    # Given a jobsched logger whose handler (as in the embedded mode, where every function configures
    # logging in one process) was configured last by the capacity function
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LambdaPowertoolsFormatter(service="jobsched-capacity"))
    handler.addFilter(RunKeysFilter())
    log = logging.getLogger("jobsched.tests.function_service")
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.INFO)
    try:
        # When the dispatcher's and the dlq consumer's invocations log through it, and then code
        # outside any invocation
        Function(function_spec("dispatcher"), lambda e, c: log.info("tick")).invoke({})
        Function(function_spec("dlq_consumer"), lambda e, c: log.info("poison")).invoke({})
        log.info("outside")
    finally:
        log.removeHandler(handler)
    # Then each line names the function it was logged in (outside one, the handler's own service)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line["message"], line["service"]) for line in lines] == [
        ("tick", "jobsched-dispatcher"),
        ("poison", "jobsched-dlq-consumer"),
        ("outside", "jobsched-capacity"),
    ]


@pytest.mark.parametrize("spec", resources.FUNCTIONS, ids=lambda spec: spec.name)
def test_each_functions_service_is_the_one_its_own_logger_names(spec: resources.FunctionSpec) -> None:
    module = importlib.import_module(spec.handler.rpartition(".")[0])
    assert Function(spec, lambda e, c: None).service == module.logger.service
