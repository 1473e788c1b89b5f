"""Idempotent effects under faults of the idempotency table (found by the fault-injection battery,
docs/reliability.md): a failed save after the effect ran, and an effect left "in progress" by an
attempt that ended without recording it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from jobsched.bench.faults import FaultPlan, Kind, Rule, hook
from jobsched.core.errors import RetryableError
from jobsched.services.deliveries import Delivery
from jobsched.targets.context import SAVE_TRIES, IdempotentEffects
from jobsched.targets.registry import job, unregister
from tests.aws.conftest_worker import Kit, sent_messages


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


def _save(params: dict) -> bool:
    """The save of an effect's result: the UpdateItem that sets the record's status to COMPLETED."""
    return any(v == {"S": "COMPLETED"} for v in params.get("ExpressionAttributeValues", {}).values())


def test_an_effect_whose_first_save_fails_is_saved_again_and_never_runs_twice(aws):
    # Given the idempotency table throttles the first save of an effect's result (after the effect ran)
    plan = FaultPlan(rules=[Rule(Kind.THROTTLE, "dynamodb", frozenset({"UpdateItem"}), match=_save, limit=1)])
    plan.active = True
    client = hook(plan, aws.clients.session.client("dynamodb"), "dynamodb")
    effects = IdempotentEffects(client, aws.settings.idempotency_table)
    calls: list[int] = []

    def charge() -> dict:
        calls.append(1)
        return {"charge_id": f"ch_{len(calls)}"}

    # When the effect runs, and then runs again for a later attempt of the same run
    first = effects.run("run-1:charge", charge, remaining_ms=30_000)
    second = effects.run("run-1:charge", charge, remaining_ms=30_000)
    # Then the save was retried: the later call got the stored result and charged nothing
    assert plan.injected == {"throttle:dynamodb.UpdateItem": 1}
    assert first == second == {"charge_id": "ch_1"}
    assert calls == [1]


class Pauses:
    """A monotonic clock that moves only when slept on, and the pauses slept."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def _every_save_throttled(aws) -> tuple[FaultPlan, IdempotentEffects, Pauses]:
    plan = FaultPlan(rules=[Rule(Kind.THROTTLE, "dynamodb", frozenset({"UpdateItem"}), match=_save)])
    plan.active = True
    client = hook(plan, aws.clients.session.client("dynamodb"), "dynamodb")
    pauses = Pauses()
    effects = IdempotentEffects(
        client, aws.settings.idempotency_table, sleep=pauses.sleep, monotonic=pauses.monotonic
    )
    return plan, effects, pauses


def test_an_effect_whose_every_save_fails_returns_its_result_and_does_not_run_again_meanwhile(aws, caplog):
    # Given the idempotency table throttles every save of an effect's result (the effect runs first)
    plan, effects, pauses = _every_save_throttled(aws)
    calls: list[int] = []

    def charge() -> dict:
        calls.append(1)
        return {"charge_id": f"ch_{len(calls)}"}

    # When the effect runs in an attempt with 30 s left
    result = effects.run("run-1:charge", charge, remaining_ms=30_000)
    # Then the save was tried SAVE_TRIES more times, 0.2 s apart and more (at most 1 s), and the
    # effect's result came back all the same (failing the attempt would have the next run it again)
    assert result == {"charge_id": "ch_1"}
    assert plan.injected == {"throttle:dynamodb.UpdateItem": 1 + SAVE_TRIES}
    assert pauses.slept == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert "was not saved" in caplog.text and "run-1:charge" in caplog.text
    # and its record stays "in progress": a later call within the attempt's deadline does not run it
    with pytest.raises(RetryableError, match="in progress"):
        effects.run("run-1:charge", charge, remaining_ms=30_000)
    assert calls == [1]


def test_the_saves_of_an_effect_stop_a_second_before_the_attempts_deadline(aws):
    # Given every save of the result fails, in an attempt with 2 s left
    plan, effects, pauses = _every_save_throttled(aws)
    # When the effect runs
    assert effects.run("run-2:charge", lambda: "done", remaining_ms=2_000) == "done"
    # Then no save started later than 1 s before the deadline: tries at 0, 0.2 and 0.6 s
    assert pauses.slept == pytest.approx([0.2, 0.4])
    assert plan.injected == {"throttle:dynamodb.UpdateItem": 1 + 3}


@pytest.fixture
def stuck_effect(kit, aws):
    """A handler whose effect fails on attempt 1 while the idempotency table refuses to delete the
    effect's "in progress" record (so the record outlives the attempt), and succeeds on a later one."""
    plan = FaultPlan(rules=[Rule(Kind.SERVER_ERROR, "dynamodb", frozenset({"DeleteItem"}), limit=1)])
    plan.active = True
    client = hook(plan, aws.clients.session.client("dynamodb"), "dynamodb")
    kit.effects = IdempotentEffects(client, aws.settings.idempotency_table)

    def charge(attempt: int) -> dict:
        if attempt == 1:
            raise RuntimeError("the card network timed out")
        return {"charged": True}

    @job("test.stuck_effect")
    def handler(payload, ctx):
        return ctx.idempotent("charge", charge, ctx.attempt)

    yield plan
    unregister("test.stuck_effect")


def test_an_effect_in_progress_delays_the_retry_past_its_deadline_instead_of_spending_attempts(
    kit, clock, aws, stuck_effect
):
    # Given attempt 1 failed inside its effect and the effect's record stayed "in progress" (deadline:
    # up to the attempt's 30 s timeout)
    _, msg = kit.new_run({"handler": "test.stuck_effect"}, {}, base_seconds=1, max_seconds=2, max_attempts=3)
    worker = kit.worker()
    assert worker.handle(Delivery.of(msg.to_json()), clock.now()).status == "retrying"
    assert stuck_effect.injected == {"server_error:dynamodb.DeleteItem": 1}
    [(body, _)] = sent_messages(aws)
    # When attempt 2 meets the effect still in progress
    out = worker.handle(Delivery.of(json.dumps(body)), clock.now())
    # Then it is retried no sooner than the effect's deadline can have passed (the run's timeout
    # later), not after the 1-2 s backoff that would spend the last attempt on the same answer
    assert out.status == "retrying"
    assert "in progress" in out.detail["error"]
    assert out.detail["delay"] >= 30
    retry = [b for b, _ in sent_messages(aws) if b["attempt"] == 3]
    assert len(retry) == 1
    assert datetime.fromisoformat(retry[0]["due_at"]) - clock.now() >= timedelta(seconds=30)
