"""Handler registry, job context, timeouts, heartbeat and the demo handlers (pure, no AWS)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

import jobsched.targets.demo  # noqa: F401  (registers demo.*)
from jobsched.core.errors import (
    ConflictError,
    LeaseLostError,
    PermanentError,
    RetryableError,
    TimeoutExceeded,
    ValidationError,
)
from jobsched.targets import executor
from jobsched.targets.context import JobContext
from jobsched.targets.executor import Heartbeat, error_info, execute_target, is_retryable, run_with_timeout
from jobsched.targets.registry import get_handler, is_registered, job, unregister

SCHEDULED = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def make_ctx(attempt: int = 1, timeout: float = 5.0) -> JobContext:
    return JobContext(
        run_id="job1~20260301T090000Z",
        job_id="job1",
        tenant="acme",
        attempt=attempt,
        max_attempts=3,
        scheduled_at=SCHEDULED,
        due_at=SCHEDULED,
        timeout_seconds=timeout,
    )


@pytest.fixture
def throwaway():
    names: list[str] = []
    yield names
    for name in names:
        unregister(name)


def test_job_decorator_registers_handler_by_name(throwaway):
    # Given a function decorated with @job
    throwaway.append("test.reg")

    @job("test.reg")
    def handler(payload, ctx):
        return 1

    # Then it is found by name
    assert is_registered("test.reg")
    assert get_handler("test.reg") is handler


def test_unknown_handler_is_a_validation_error_naming_the_known_ones():
    # When an unregistered name is looked up
    with pytest.raises(ValidationError) as err:
        get_handler("no.such.handler")
    # Then the message names it and lists what exists
    assert "no.such.handler" in err.value.message and "demo.echo" in err.value.message


def test_a_second_function_under_a_taken_name_is_refused(throwaway):
    throwaway.append("test.dup")

    @job("test.dup")
    def first(payload, ctx):
        return 1

    with pytest.raises(ConflictError):

        @job("test.dup")
        def second(payload, ctx):
            return 2

    assert get_handler("test.dup") is first


def test_invalid_handler_name_is_refused():
    with pytest.raises(ValidationError):
        job("has space")


def test_idempotency_key_is_run_id_and_effect_stable_across_attempts():
    # Given two attempts of the same run
    first, third = make_ctx(attempt=1), make_ctx(attempt=3)
    # Then the key for one effect is the same, and differs per effect
    key = first.idempotency_key("charge")
    assert key == third.idempotency_key("charge") == "job1~20260301T090000Z:charge"
    assert first.idempotency_key("email") != first.idempotency_key("charge")


def test_heartbeat_forwards_progress_and_reports_cancellation():
    seen = []
    ctx = make_ctx()
    ctx.on_progress = seen.append
    assert ctx.heartbeat({"done": 1}) is False
    ctx.cancel_event.set()
    assert ctx.heartbeat() is True and ctx.cancelled
    assert seen == [{"done": 1, "total": None, "unit": "steps"}]


@pytest.mark.parametrize(
    ("progress", "field"),
    [
        ("half way", "progress"),
        (5, "progress"),
        ([1, 2], "progress"),
        ({"rows": 5}, "progress"),
        ({"done": -1}, "progress.done"),
        ({"done": 1.5, "total": 3}, "progress.done"),
        ({"done": True}, "progress.done"),
        ({"done": 4, "total": 3}, "progress.total"),
        ({"done": 1, "unit": "chunks"}, "progress.unit"),
        ({"done": 1, "unit": "Rows!"}, "progress.unit"),
    ],
)
def test_heartbeat_refuses_progress_that_is_not_a_count_and_says_why(progress, field):
    """Given a plain handler's context, when it reports progress that is not {"done", "total"?,
    "unit"?} with whole counts, then heartbeat raises ValidationError naming the field and the shape
    allowed, and nothing is recorded."""
    seen = []
    ctx = make_ctx()
    ctx.on_progress = seen.append
    with pytest.raises(ValidationError) as raised:
        ctx.heartbeat(progress)
    assert raised.value.field == field and '{"done": int >= 0' in raised.value.message
    assert seen == []


def test_heartbeat_keeps_a_whole_progress_with_its_unit():
    seen = []
    ctx = make_ctx()
    ctx.on_progress = seen.append
    ctx.heartbeat({"done": 3, "total": 10, "unit": "rows"})
    assert seen == [{"done": 3, "total": 10, "unit": "rows"}]


def test_run_with_timeout_returns_the_result():
    assert run_with_timeout(lambda: 42, timeout_seconds=1, cancel_event=threading.Event()) == 42


def test_run_with_timeout_reraises_the_handlers_exception():
    def boom():
        raise PermanentError("bad input")

    with pytest.raises(PermanentError, match="bad input"):
        run_with_timeout(boom, timeout_seconds=1, cancel_event=threading.Event())


def test_timeout_raises_timeout_exceeded_and_sets_the_cancel_flag():
    # Given a function that would block for 5 s, and a 50 ms timeout
    cancel = threading.Event()
    release = threading.Event()
    started = time.monotonic()
    # When it runs
    with pytest.raises(TimeoutExceeded):
        run_with_timeout(lambda: release.wait(5), timeout_seconds=0.05, cancel_event=cancel)
    # Then the caller returns promptly and the cooperative flag is set
    assert time.monotonic() - started < 1.0
    assert cancel.is_set()
    release.set()


def test_demo_sleep_stops_early_on_timeout_because_it_is_cooperative():
    ctx = make_ctx(timeout=0.05)
    with pytest.raises(TimeoutExceeded):
        execute_target({"handler": "demo.sleep"}, {"seconds": 30}, ctx, timeout_seconds=0.05)
    assert ctx.cancelled


def test_demo_sleep_returns_cancelled_when_flag_is_set():
    ctx = make_ctx()
    ctx.cancel_event.set()
    out = execute_target({"handler": "demo.sleep"}, {"seconds": 30}, ctx, timeout_seconds=2)
    assert out["cancelled"] is True


def test_demo_sleep_reports_progress():
    progress = []
    ctx = make_ctx()
    ctx.on_progress = progress.append
    out = execute_target({"handler": "demo.sleep"}, {"seconds": 0.05}, ctx, timeout_seconds=2)
    assert out == {"slept": 0.05, "cancelled": False}
    assert progress and {(p["total"], p["unit"]) for p in progress} == {(50, "ms")}
    assert all(0 <= p["done"] <= 50 for p in progress)


def test_demo_sleep_reports_progress_ten_times_over_its_sleep():
    # Given a sleep of 1.5 s, when it runs, Then it reports about ten times (every 0.15 s), not every 0.1 s
    progress = []
    ctx = make_ctx()
    ctx.on_progress = progress.append
    execute_target({"handler": "demo.sleep"}, {"seconds": 1.5}, ctx, timeout_seconds=5)
    assert 9 <= len(progress) <= 11


def test_demo_sleep_returns_at_once_when_cancelled_between_reports():
    # Given a sleep of 20 s (reports every second), when it is cancelled 0.2 s in, Then it returns at once
    ctx = make_ctx()
    threading.Timer(0.2, ctx.cancel_event.set).start()
    started = time.monotonic()
    out = execute_target({"handler": "demo.sleep"}, {"seconds": 20}, ctx, timeout_seconds=30)
    assert out["cancelled"] is True and time.monotonic() - started < 0.6


def test_demo_echo_returns_its_payload():
    assert execute_target({"handler": "demo.echo"}, {"a": 1}, make_ctx(), timeout_seconds=1) == {"a": 1}


@pytest.mark.parametrize(("kind", "error"), [("retryable", RetryableError), ("permanent", PermanentError)])
def test_demo_fail_raises_the_requested_kind(kind, error):
    with pytest.raises(error):
        execute_target({"handler": "demo.fail"}, {"kind": kind}, make_ctx(), timeout_seconds=1)


def test_demo_flaky_fails_its_first_attempts_then_succeeds():
    target, payload = {"handler": "demo.flaky"}, {"failures": 2}
    for attempt in (1, 2):
        with pytest.raises(RetryableError):
            execute_target(target, payload, make_ctx(attempt=attempt), timeout_seconds=1)
    out = execute_target(target, payload, make_ctx(attempt=3), timeout_seconds=1)
    assert out == {"attempt": 3, "failures": 2}


def test_unknown_handler_target_fails_permanently():
    with pytest.raises(ValidationError) as err:
        execute_target({"handler": "nope"}, {}, make_ctx(), timeout_seconds=1)
    assert not is_retryable(err.value)


def test_malformed_target_is_a_validation_error():
    with pytest.raises(ValidationError):
        execute_target({"lambda": "x"}, {}, make_ctx(), timeout_seconds=1)


@pytest.mark.parametrize(
    ("exc", "retryable"),
    [
        (RetryableError("x"), True),
        (TimeoutExceeded("x"), True),
        (RuntimeError("bug"), True),
        (PermanentError("x"), False),
        (ValidationError("x"), False),
    ],
)
def test_failure_classification(exc, retryable):
    assert is_retryable(exc) is retryable


def test_error_info_is_small_and_names_the_type():
    info = error_info(PermanentError("x" * 5000))
    assert info["type"] == "PermanentError" and info["code"] == "permanent" and len(info["message"]) == 1000


def test_heartbeat_beats_until_stopped():
    # Given a beat that counts, every 5 ms
    beaten = threading.Event()
    calls = []

    def beat():
        calls.append(1)
        if len(calls) >= 3:
            beaten.set()

    # When the heartbeat runs until three beats happened
    with Heartbeat(beat, 0.005, threading.Event()) as hb:
        assert beaten.wait(2)
    # Then it stopped beating after exit
    count = len(calls)
    time.sleep(0.03)
    assert len(calls) == count and hb.beats >= 3


def test_heartbeat_lease_lost_stops_and_cancels():
    cancel = threading.Event()

    def beat():
        raise LeaseLostError("taken over")

    hb = Heartbeat(beat, 10, cancel)
    hb.beat_once()
    assert hb.lost and cancel.is_set()


def test_heartbeat_survives_a_transient_error():
    cancel = threading.Event()
    outcomes = iter([RuntimeError("throttled"), None])

    def beat():
        err = next(outcomes)
        if err:
            raise err

    hb = Heartbeat(beat, 10, cancel)
    hb.beat_once()
    hb.beat_once()
    assert hb.beats == 1 and not hb.lost and not cancel.is_set()


def test_heartbeats_one_after_another_reuse_one_kept_daemon_thread(monkeypatch):
    # A pool of its own: the process-wide one may hold idle threads left by other tests, any of which
    # may take the second task (the claim is "no thread started", not "the same one of many").
    monkeypatch.setattr(executor, "_HEARTBEAT_THREADS", executor.KeptThreads("jobsched-heartbeat"))
    threads: list[threading.Thread] = []
    beaten = threading.Event()

    def beat():
        threads.append(threading.current_thread())
        beaten.set()

    # Given a heartbeat that beat once and was stopped, then another
    for _ in range(2):
        beaten.clear()
        with Heartbeat(beat, 0.005, threading.Event()):
            assert beaten.wait(2)
    # Then both beat on the same kept thread (none started for the second), a daemon like before
    assert len(set(threads)) == 1
    assert threads[0].daemon and threads[0].name == "jobsched-heartbeat"
