"""Guarantee 2: an idempotent effect runs once across retries and redeliveries (Powertools idempotency
on the idempotency table, in moto)."""

from __future__ import annotations

import json

import pytest

from jobsched.core.errors import RetryableError
from jobsched.services.deliveries import Delivery
from jobsched.targets.registry import job, unregister
from tests.aws.conftest_worker import Kit, sent_messages


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def charges():
    """A handler that charges a card through ``ctx.idempotent`` and then fails on attempt 1."""
    calls: list[str] = []

    def charge(amount: int, key: str) -> dict:
        calls.append(key)
        return {"charge_id": f"ch_{len(calls)}", "amount": amount}

    @job("test.charge")
    def handler(payload, ctx):
        receipt = ctx.idempotent("charge", charge, payload["amount"], ctx.idempotency_key("charge"))
        if ctx.attempt == 1:
            raise RetryableError("the e-mail service is down")
        return receipt

    yield calls
    unregister("test.charge")


def test_an_idempotent_effect_runs_once_across_retries(kit, clock, aws, charges):
    # Given a handler whose first attempt charges and then fails retryably
    run, msg = kit.new_run({"handler": "test.charge"}, {"amount": 42}, base_seconds=0, max_seconds=0)
    worker = kit.worker()
    assert worker.handle(Delivery.of(msg.to_json()), clock.now()).status == "retrying"
    # When the retry runs
    [(body, _)] = sent_messages(aws)
    out = worker.handle(Delivery.of(json.dumps(body)), clock.now())
    # Then the charge happened once, and attempt 2 got attempt 1's stored result
    assert out.status == "succeeded"
    assert charges == [f"{run.id}:charge"]
    assert kit.runs.get(run.id).output == {"charge_id": "ch_1", "amount": 42}


def test_effects_of_different_runs_are_independent(kit, clock, charges):
    from datetime import timedelta

    # Given two runs of the same job
    _, first = kit.new_run({"handler": "test.charge"}, {"amount": 1}, max_attempts=1)
    _, second = kit.new_run(
        {"handler": "test.charge"},
        {"amount": 2},
        max_attempts=1,
        scheduled_at=clock.now() + timedelta(minutes=1),
    )
    # When both run (and fail after charging)
    kit.worker().handle(Delivery.of(first.to_json()), clock.now())
    clock.advance(minutes=1)
    kit.worker().handle(Delivery.of(second.to_json()), clock.now())
    # Then each charged once under its own key
    assert len(charges) == 2 and charges[0] != charges[1]
