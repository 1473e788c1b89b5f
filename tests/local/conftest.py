"""Fixtures for the embedded-mode tests: the whole machinery in-process, on free ports.

The functions are replaced by :class:`Recorder` handlers, so these tests prove the machinery (moto
server, provisioning, pollers, schedules, HTTP bridge, run-event log) independently of the real
functions; ``test_end_to_end.py`` runs the real ones.

The end-to-end modules that need the embedded mode with the real functions and only its defaults
share one child process (``shared_embedded``, ``shared_process``): :mod:`tests.local.shared_embedded`
says which modules may join it and how (their own tenants, nothing global, nothing left running).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jobsched.local.config import LocalConfig
from jobsched.local.embedded import EmbeddedMode

# The end-to-end modules' shared embedded mode (its module says which modules use it, and how).
from tests.local import shared_embedded as shared
from tests.local.shared_embedded import shared_embedded, shared_process  # noqa: F401

VISIBILITY_SECONDS = 1


class Recorder:
    """A Lambda handler that records every event and answers according to the records' bodies.

    Body ``fail`` -> the record is reported in ``batchItemFailures``; ``raise`` -> the handler raises
    (the whole batch fails); ``block`` -> the invocation waits until ``release`` is set. Any other
    body succeeds.
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.contexts: list[Any] = []
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        with self._lock:
            self.events.append(event)
            self.contexts.append(context)
        records = event.get("Records", [])
        bodies = [r["body"] for r in records]
        if "raise" in bodies:
            raise RuntimeError("the test handler was told to raise")
        if "block" in bodies:
            self.release.wait(10)
        return {
            "batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records if r["body"] == "fail"]
        }

    def records(self, body: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            events = list(self.events)
        return [r for e in events for r in e.get("Records", []) if body is None or r["body"] == body]


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(interval)


class Machinery:
    """The started embedded mode plus its recording handlers."""

    def __init__(self, mode: EmbeddedMode, handlers: dict[str, Recorder]):
        self.mode = mode
        self.handlers = handlers

    @property
    def sqs(self) -> Any:
        return self.mode.clients["sqs"]

    def queue(self, kind: str) -> Any:
        assert self.mode.provisioned is not None
        return self.mode.provisioned.queues[kind]

    def send(self, kind: str, body: str) -> str:
        response = self.sqs.send_message(QueueUrl=self.queue(kind).url, MessageBody=body, MessageGroupId="t1")
        return response["MessageId"]

    def depth(self, url: str) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(
            attributes["ApproximateNumberOfMessagesNotVisible"]
        )


def machinery_config(**overrides: Any) -> LocalConfig:
    values: dict[str, Any] = {
        "port": 0,
        "prefix": f"t{uuid.uuid4().hex[:8]}",
        "shards": 3,
        "slots": {"high": 2, "default": 2, "low": 1, "long": 1},
        "visibility_timeout_seconds": VISIBILITY_SECONDS,
        "tick_seconds": 0.2,
        "sweeper_seconds": 0.5,
        "housekeeping_seconds": 0.5,
        "tenants": {"acme": "tok-acme"},
        "demo": False,
        "shutdown_grace_seconds": 1.0,
        # Long polls within the grace, so a stop finds every receiver ended (jobsched dev's idle queues
        # long-poll 5 s and its DLQs 20 s; a stop abandons a poll still in flight).
        "poll_wait_seconds": 1,
        "dlq_poll_wait_seconds": 1,
    }
    values.update(overrides)
    return LocalConfig(**values)


@pytest.fixture(scope="package")
def machinery() -> Iterator[Machinery]:
    """Given the embedded mode running with recording handlers for every function."""
    handlers = {name: Recorder() for name in ("api", "dispatcher", "worker", "dlq_consumer", "sweeper")}
    mode = EmbeddedMode(machinery_config(), handlers=dict(handlers), out=lambda line: None)
    mode.start()
    try:
        yield Machinery(mode, handlers)
    finally:
        for handler in handlers.values():
            handler.release.set()
        mode.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """The shared embedded mode is stopped once its last test is torn down (:mod:`.shared_embedded`)."""
    try:
        return (yield)
    finally:
        shared.after_test(item)
