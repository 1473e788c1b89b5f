"""The worker waits out a delivery that surfaces up to a second before its due instant.

``DelaySeconds`` is rounded down (:func:`jobsched.core.messages.delay_seconds`), so a message may become
visible up to 1 s early; the worker sleeps the rest and claims the run at its due instant, never before.
The sleep is injected: here it moves the fake clock, so no test waits for real.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from jobsched.core.models import RunState
from jobsched.services.deliveries import Delivery
from tests.aws.conftest_worker import Kit
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


def clock_sleep(clock, slept: list[float]):
    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    return sleep


def test_a_delivery_600_ms_early_waits_and_starts_at_the_due_instant(kit, clock):
    # Given a run due 0.6 s from now, its message delivered now (DelaySeconds 0 after rounding down)
    run, msg = kit.new_run(scheduled_at=clock.now() + timedelta(seconds=0.6))
    slept: list[float] = []
    worker = kit.worker()
    worker.sleep = clock_sleep(clock, slept)
    # When the worker handles it
    out = worker.handle(Delivery.of(msg.to_json()), clock.now())
    # Then it slept exactly the rest, and the first attempt started at the due instant
    assert out.status == "succeeded"
    assert slept == [pytest.approx(0.6)]
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.SUCCEEDED
    assert stored.attempts[0].started_at == run.due_at


def test_a_delivery_on_time_does_not_sleep(kit, clock):
    # Given a run due now
    _run, msg = kit.new_run()
    slept: list[float] = []
    worker = kit.worker()
    worker.sleep = clock_sleep(clock, slept)
    # When the worker handles it
    out = worker.handle(Delivery.of(msg.to_json()), clock.now())
    # Then it ran at once
    assert out.status == "succeeded" and slept == []


def test_a_delivery_more_than_a_second_early_is_redelayed_not_waited(kit, clock):
    # Given a message delivered 5 s before its due instant
    run, msg = kit.new_run()
    early = replace(msg, due_at=clock.now() + timedelta(seconds=5))
    slept: list[float] = []
    worker = kit.worker()
    worker.sleep = clock_sleep(clock, slept)
    # When the worker handles it
    out = worker.handle(Delivery.of(early.to_json()), clock.now())
    # Then it is re-sent for later, without a wait and without a claim
    assert out.status == "redelayed" and slept == []
    assert kit.runs.get(run.id).state is RunState.QUEUED
