"""Retries and dead letters: timings, permanent failures, exhaustion, timeouts."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest

from jobsched.core.messages import RunMessage
from jobsched.core.models import RunState
from jobsched.runtime.observability import RUNS_DEAD_LETTERED, RUNS_RETRIED
from jobsched.services.deliveries import Delivery
from jobsched.services.worker import retry_delay
from tests.aws.conftest import T0
from tests.aws.conftest_worker import Kit, sent_messages
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


def test_retryable_failure_is_retried_with_full_jitter_backoff_by_sqs_delay(kit, clock, aws):
    # Given a run that fails retryably, base 10 s, cap 300 s, and a seeded rng
    run, msg = kit.new_run({"handler": "demo.fail"}, {"kind": "retryable"}, base_seconds=10)
    expected = retry_delay(msg, 1, random.Random(7))
    assert 0 <= expected <= 10
    # When the first attempt runs
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    # Then the run waits in `retrying` until now + delay and attempt 2 is queued with that delay
    assert out.status == "retrying" and out.detail["delay"] == pytest.approx(expected)
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.RETRYING and stored.attempt == 1
    assert stored.attempts[0].outcome == "retrying" and "RetryableError" in stored.attempts[0].error
    [(body, delay)] = sent_messages(aws)
    assert body["attempt"] == 2 and delay == int(expected // 1)  # rounded down: the worker waits the rest
    due = RunMessage.from_json(json.dumps(body)).due_at
    assert abs((due - (clock.now() + timedelta(seconds=expected))).total_seconds()) < 0.001
    assert kit.metrics.count(RUNS_RETRIED) == 1


@pytest.mark.parametrize(
    ("attempt", "ceiling"),
    [(1, 2.0), (2, 4.0), (3, 8.0), (6, 64.0), (9, 300.0), (30, 300.0)],
)
def test_retry_delay_is_capped_exponential_full_jitter(attempt, ceiling):
    # Given base 2 s, cap 300 s: the delay after attempt n is uniform in [0, min(300, 2 * 2**(n-1))]
    msg = RunMessage(
        run_id="j.20260302T120000.000Z",
        job_id="j",
        tenant="t",
        attempt=attempt,
        scheduled_at=T0,
        due_at=T0,
        target={"handler": "demo.echo"},
    )
    delays = [retry_delay(msg, attempt, random.Random(seed)) for seed in range(200)]
    assert all(0 <= d <= ceiling for d in delays)
    assert max(delays) > ceiling * 0.9  # the whole range is used (full jitter)


def test_retry_longer_than_900s_travels_as_a_delayed_message_that_redelays_itself(kit, clock, aws):
    # Given a run whose backoff is 2000-3000 s (base = cap = 3000, seeded)
    run, msg = kit.new_run({"handler": "demo.fail"}, {}, base_seconds=3000, max_seconds=3000)
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    delay = out.detail["delay"]
    assert delay > 900
    # Then the retry message waits the SQS maximum, 900 s
    [(body, sqs_delay)] = sent_messages(aws)
    assert sqs_delay == 900
    # When it arrives after 900 s, it is re-sent for the rest instead of running early
    clock.advance(seconds=900)
    again = kit.worker("worker-b").handle(Delivery.of(json.dumps(body)), clock.now())
    assert again.status == "redelayed"
    assert kit.runs.get(run.id).state is RunState.RETRYING
    remaining = [d for b, d in sent_messages(aws) if b["attempt"] == 2]
    assert min(remaining, default=None) == min(900, int((delay - 900) // 1))


def test_permanent_error_goes_to_the_dead_letters_without_retries(kit, clock, aws):
    # Given a handler that raises PermanentError, with 5 attempts allowed
    run, msg = kit.new_run({"handler": "demo.fail"}, {"kind": "permanent"}, max_attempts=5)
    # When it runs once
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    # Then it is failed and dead-lettered at once, with no retry message
    assert out.status == "dead_lettered" and out.detail["reason"] == "permanent"
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.FAILED and stored.attempt == 1 and stored.dead_lettered_at == clock.now()
    assert "PermanentError" in stored.error
    assert sent_messages(aws) == []
    dead, _ = kit.runs.list_dead_letters("acme")
    assert [d.id for d in dead] == [run.id]
    assert kit.metrics.count(RUNS_DEAD_LETTERED) == 1 and kit.metrics.count(RUNS_RETRIED) == 0


def test_unknown_handler_is_permanent(kit, clock):
    _, msg = kit.new_run({"handler": "no.such"}, {})
    assert kit.worker().handle(Delivery.of(msg.to_json()), clock.now()).detail["reason"] == "permanent"


def test_retries_exhausted_dead_letter_with_the_whole_attempt_history(kit, clock, aws):
    # Given a run that always fails retryably, 3 attempts, no backoff
    run, msg = kit.new_run({"handler": "demo.fail"}, {}, max_attempts=3, base_seconds=0, max_seconds=0)
    worker = kit.worker()
    body = msg.to_json()
    # When each attempt's message is processed in turn
    statuses = []
    for _ in range(3):
        statuses.append(worker.handle(Delivery.of(body), clock.now()).status)
        pending = [b for b, _ in sent_messages(aws)]
        body = json.dumps(pending[-1]) if pending else body
        clock.advance(seconds=1)
    # Then two retries and a dead letter, with three failed attempts in the history
    assert statuses == ["retrying", "retrying", "dead_lettered"]
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.FAILED and [a.outcome for a in stored.attempts] == ["retrying"] * 2 + [
        "failed"
    ]
    item = kit.attempts.get_item(run.id)
    assert item["dl_reason"] == "exhausted" and json.loads(item["dl_message"])["payload"] == {}


def test_flaky_handler_succeeds_on_a_later_attempt(kit, clock, aws):
    run, msg = kit.new_run({"handler": "demo.flaky"}, {"failures": 1}, base_seconds=0, max_seconds=0)
    worker = kit.worker()
    assert worker.handle(Delivery.of(msg.to_json()), clock.now()).status == "retrying"
    [(body, delay)] = sent_messages(aws)
    assert delay == 0
    assert worker.handle(Delivery.of(json.dumps(body)), clock.now()).status == "succeeded"
    stored = kit.runs.get(run.id)
    assert stored.output == {"attempt": 2, "failures": 1}
    assert [a.outcome for a in stored.attempts] == ["retrying", "succeeded"]


def test_timeout_fails_the_attempt_as_retryable(kit, clock):
    # Given a cooperative sleeper with a 1 s timeout that would sleep 30 s
    _, msg = kit.new_run({"handler": "demo.sleep"}, {"seconds": 30}, timeout_seconds=1)
    # When it runs
    out = kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    # Then the attempt failed with TimeoutExceeded and a retry is scheduled
    assert out.status == "retrying" and "TimeoutExceeded" in out.detail["error"]
