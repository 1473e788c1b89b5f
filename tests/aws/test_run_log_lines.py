"""Every log line written while a run executes is JSON with the run's keys (issue 10 §6): ours and the
handler's own, in the handler's thread, the heartbeat's and the cancel watch's."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

import functions.worker as worker_function
from jobsched.local.invoke import LambdaContext
from jobsched.runtime import observability as obs
from jobsched.services.deliveries import Delivery
from jobsched.targets.registry import job, unregister
from tests.aws.conftest_worker import Kit
from tests.aws.test_worker_function import sqs_event

RUN_KEYS = ("job_id", "run_id", "attempt", "tenant")


@pytest.fixture
def kit(aws_environ, clock):
    with worker_function.seam.installed(clock=clock):
        yield Kit(aws_environ, clock)


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """What the worker function's log handlers write (its Powertools logger's, shared with the
    ``jobsched`` loggers, and the root logger's), captured in one buffer."""
    buffer = io.StringIO()
    handlers = [worker_function.logger.registered_handler]
    handlers += [h for h in logging.getLogger().handlers if h.get_name() == "jobsched-root-json"]
    assert len(handlers) == 2, "the worker function configures its handler and the root logger's"
    previous = [h.setStream(buffer) for h in handlers]
    yield buffer
    for handler, stream in zip(handlers, previous, strict=True):
        handler.setStream(stream)


@pytest.fixture
def logging_handler():
    """A handler ``test.logging`` that logs through its own (non-jobsched) logger, as users' code does."""
    seen: dict = {}

    @job("test.logging")
    def logging_job(payload, ctx):
        seen["thread"] = threading.current_thread().name
        logging.getLogger("customer.billing").info("charging %s", payload["customer"])
        return {"ok": True}

    yield seen
    unregister("test.logging")


def _records(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]


def test_a_handlers_own_log_line_from_its_thread_is_json_with_the_run_keys(
    kit, aws_environ, lines, logging_handler
):
    """Given a run whose handler logs through ``logging.getLogger("customer.billing")``,
    When the worker function handles its delivery (the handler runs in the executor's thread),
    Then the handler's line is a JSON object with job_id, run_id, attempt and tenant, and so is the
    worker's own line about the delivery."""
    run, msg = kit.new_run({"handler": "test.logging"}, {"customer": "c-42"}, job_id="logjob")

    response = worker_function.handler(sqs_event(aws_environ, [msg.to_json()]), LambdaContext("worker", 900))

    assert response["batchItemFailures"] == []
    assert logging_handler["thread"] == "jobsched-target"  # not the record's thread: the executor's
    records = _records(lines)
    [mine] = [r for r in records if r.get("message") == "charging c-42"]
    expected = {"job_id": "logjob", "run_id": run.id, "attempt": 1, "tenant": "acme"}
    assert {k: mine.get(k) for k in RUN_KEYS} == expected
    assert mine["level"] == "INFO" and mine["name"] == "customer.billing"
    [handled] = [r for r in records if r.get("message") == "run delivery handled"]
    assert {k: handled.get(k) for k in RUN_KEYS} == expected


def test_heartbeat_and_cancel_watch_lines_carry_the_run_keys(kit, clock, caplog):
    """Given a worker whose heartbeat write and cancel-flag read fail (throttled), beating every 10 ms,
    When a run executes for a moment,
    Then the lines those two threads log carry the run's keys (the keys reach threads the worker
    starts through the copied context)."""
    caplog.handler.addFilter(obs.RunKeysFilter())
    run, msg = kit.new_run({"handler": "demo.sleep"}, {"seconds": 0.3}, job_id="beatjob")
    worker = kit.worker(heartbeat=0.01, cancel_poll_seconds=0.01)

    def throttled(*args, **kwargs):
        raise RuntimeError("throttled")

    worker.attempts.heartbeat = throttled
    worker.attempts.cancel_flags = throttled

    with caplog.at_level(logging.ERROR, logger="jobsched.targets.executor"):
        assert worker.handle(Delivery.of(msg.to_json()), clock.now()).status == "succeeded"

    by_thread = {r.threadName: r for r in caplog.records if r.name == "jobsched.targets.executor"}
    assert {"jobsched-heartbeat", "jobsched-cancel-watch"} <= set(by_thread)
    for record in by_thread.values():
        assert (record.job_id, record.run_id, record.attempt, record.tenant) == ("beatjob", run.id, 1, "acme")


def test_no_run_keys_outside_a_run(caplog):
    """Given no run being handled, When something logs, Then its record carries no run key."""
    caplog.handler.addFilter(obs.RunKeysFilter())
    with caplog.at_level(logging.INFO):
        logging.getLogger("customer.other").info("between runs")
    [record] = [r for r in caplog.records if r.getMessage() == "between runs"]
    assert not any(hasattr(record, k) for k in RUN_KEYS)
