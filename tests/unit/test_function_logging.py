"""The functions' log handlers write to the process's standard output as it is when a line is written.

A handler that kept the ``sys.stdout`` of the moment it was made printed ``--- Logging error ---``
(``ValueError: I/O operation on closed file``) for every later line once that stream was closed: the
first function module imported inside a ``capsys`` test — ours, or a user's test of their own
handlers — bound the root logger's handler to that test's capture, and a later test on the same
process that logged through the root logger printed the error instead of its line.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import uuid
from collections.abc import Iterator

import pytest

from jobsched.runtime import observability as obs


@pytest.fixture
def fresh_logging() -> Iterator[None]:
    """The root logger and the ``jobsched`` logger as they were, whatever the test configures; the
    root logger starts without our JSON handler, as in a process that has imported no function, and
    the lines follow ``sys.stdout`` (the default; the suite fixes them on ``sys.__stdout__``,
    tests/conftest.py)."""
    root, ours = logging.getLogger(), logging.getLogger("jobsched")
    saved = (list(root.handlers), root.level, list(ours.handlers), ours.level, ours.propagate)
    for handler in [h for h in root.handlers if h.get_name() == "jobsched-root-json"]:
        root.removeHandler(handler)
    stream = obs.set_log_stream(None)
    yield
    obs.set_log_stream(stream)
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    ours.handlers[:] = saved[2]
    ours.setLevel(saved[3])
    ours.propagate = saved[4]


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_lines_after_the_stdout_of_configuration_is_closed_go_to_the_current_stdout(
    fresh_logging: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a function's logging configured while sys.stdout was a stream that is then closed
    # (a capture that has ended)
    earlier = io.StringIO()
    monkeypatch.setattr(sys, "stdout", earlier)
    logger = obs.make_logger(f"test-logging-{uuid.uuid4().hex[:8]}")
    obs.configure_function_logging(logger)
    earlier.close()
    monkeypatch.undo()
    # When the function's logger, a jobsched logger and another library's logger (through the root
    # logger) each write a line
    logger.info("from the function")
    logging.getLogger("jobsched.test_function_logging").info("from jobsched")
    logging.getLogger("customer.billing").warning("from a handler")
    # Then each line is JSON on the stdout of now, and nothing reports a logging error
    captured = capsys.readouterr()
    assert "Logging error" not in captured.err and "closed file" not in captured.err
    messages = {line["message"]: line for line in _lines(captured.out)}
    assert set(messages) == {"from the function", "from jobsched", "from a handler"}
    assert messages["from a handler"]["name"] == "customer.billing"
    assert messages["from a handler"]["level"] == "WARNING"


def test_a_stream_set_on_a_handler_still_receives_its_lines(fresh_logging: None) -> None:
    # Given the root logger's JSON handler pointed at a buffer (as the run-log tests do)
    obs.configure_function_logging(obs.make_logger(f"test-logging-{uuid.uuid4().hex[:8]}"))
    [handler] = [h for h in logging.getLogger().handlers if h.get_name() == "jobsched-root-json"]
    assert isinstance(handler, logging.StreamHandler)
    buffer = io.StringIO()
    previous = handler.setStream(buffer)
    try:
        # When another library logs
        logging.getLogger("customer.billing").warning("into the buffer")
    finally:
        handler.setStream(previous)
    # Then the line is in that buffer
    assert [line["message"] for line in _lines(buffer.getvalue())] == ["into the buffer"]


def test_a_fixed_log_stream_gets_the_lines_whatever_sys_stdout_becomes(
    fresh_logging: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a function's logging configured and the lines fixed on a stream of their own
    logger = obs.make_logger(f"test-logging-{uuid.uuid4().hex[:8]}")
    obs.configure_function_logging(logger)
    fixed = io.StringIO()
    assert obs.set_log_stream(fixed) is None  # the default it replaced: follow sys.stdout
    # When lines are written while sys.stdout is another stream (a test's capture)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    logger.info("from the function")
    logging.getLogger("customer.billing").warning("from a handler")
    monkeypatch.undo()
    # Then they are on the fixed stream, none on the capture
    assert [line["message"] for line in _lines(fixed.getvalue())] == ["from the function", "from a handler"]
    assert capsys.readouterr().out == ""
    # And set back to None, they follow sys.stdout again
    assert obs.set_log_stream(None) is fixed
    logger.info("back on stdout")
    assert [line["message"] for line in _lines(capsys.readouterr().out)] == ["back on stdout"]
