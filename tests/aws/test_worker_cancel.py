"""Prompt cancel of a running run (issue 10 §3, decision 0013): the cancel watch reads the flag every
``cancel_poll_seconds`` while the target runs, apart from the lease-extending heartbeat."""

from __future__ import annotations

import time

import pytest

from jobsched.core.models import RunState
from jobsched.targets.registry import job, unregister
from tests.aws.conftest_worker import Kit

POLL = 0.2  # the cancel watch's period in these tests (1 s deployed)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def handler_slot():
    """Register a throwaway handler ``test.cancel-slot`` whose body the test supplies."""
    box: dict = {}

    @job("test.cancel-slot")
    def slot(payload, ctx):
        return box["fn"](payload, ctx)

    yield box
    unregister("test.cancel-slot")


def test_a_cooperative_handler_sees_a_cancel_within_the_poll_period_without_a_heartbeat(
    kit, clock, handler_slot
):
    """Given a cooperative handler running with the heartbeat an hour away and a 0.2 s cancel watch,
    When the run is flagged for cancellation while it runs,
    Then the handler sees ``ctx.cancelled`` within the period (plus a read), the run ends cancelled,
    and no heartbeat was written: the watch read the flag."""
    run, msg = kit.new_run({"handler": "test.cancel-slot"}, {})
    seen: dict = {}

    def cooperative(payload, ctx):
        kit.runs.request_cancel(kit.runs.get(run.id))
        flagged = time.monotonic()
        seen["cancelled"] = ctx.cancel_event.wait(5.0)
        seen["after"] = time.monotonic() - flagged
        return "stopped early"

    handler_slot["fn"] = cooperative
    worker = kit.worker(heartbeat=3600, cancel_poll_seconds=POLL)
    kit.meter.reset()

    out = worker.process(msg.to_json(), clock.now())

    assert seen["cancelled"] is True
    assert seen["after"] < POLL + 0.5
    assert out.status == "cancelled"
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.CANCELLED and stored.attempts[-1].outcome == "cancelled"
    requests = kit.meter.snapshot()["requests"]
    # the claim, the cancel request, the ending; GetItems: the test's own read and the watch's reads
    assert requests["dynamodb.UpdateItem"] == 3
    assert 2 <= requests["dynamodb.GetItem"] <= 4


def test_the_watch_reads_one_unit_per_period_only_while_the_target_runs(kit, clock, handler_slot):
    """Given a handler that runs about 1 s with a 0.2 s cancel watch and no cancellation,
    When it runs to the end,
    Then the watch made about one strongly consistent read per period (1 read unit each), nothing
    else was read, and the run succeeded."""
    _, msg = kit.new_run({"handler": "test.cancel-slot"}, {})
    handler_slot["fn"] = lambda payload, ctx: ctx.cancel_event.wait(1.0) or "done"
    worker = kit.worker(heartbeat=3600, cancel_poll_seconds=POLL)
    kit.meter.reset()

    assert worker.process(msg.to_json(), clock.now()).status == "succeeded"

    snap = kit.meter.snapshot()
    reads = snap["requests"]["dynamodb.GetItem"]
    assert 3 <= reads <= 5  # 1.0 s / 0.2 s, give or take a period on a loaded machine
    assert snap["dynamodb"]["rcu"] == float(reads)
    time.sleep(3 * POLL)
    assert kit.meter.snapshot()["requests"]["dynamodb.GetItem"] == reads  # stopped with the target


def test_a_run_shorter_than_the_period_pays_for_no_read(kit, clock):
    """Given the deployed cancel watch (1 s) and a handler that returns at once,
    When the run executes,
    Then the worker made its two writes and no read: short runs do not pay for prompt cancel."""
    _, msg = kit.new_run({"handler": "demo.echo"}, {"x": 1})
    kit.meter.reset()

    assert kit.worker(heartbeat=3600).process(msg.to_json(), clock.now()).status == "succeeded"

    assert kit.meter.snapshot()["requests"] == {"dynamodb.UpdateItem": 2}


def test_a_cancel_requested_before_the_target_starts_is_not_read_again(kit, clock, handler_slot):
    """Given a run flagged for cancellation after its claim, before its target starts (the claim's
    returned item carries the flag),
    When the worker executes it,
    Then the target never runs and the watch never reads."""
    _, msg = kit.new_run({"handler": "test.cancel-slot"}, {})
    ran = []
    handler_slot["fn"] = lambda payload, ctx: ran.append(1)
    worker = kit.worker(heartbeat=3600, cancel_poll_seconds=POLL)
    original = worker.attempts.claim

    def claim_then_flag(*args, **kwargs):
        claim = original(*args, **kwargs)
        claim.run.cancel_requested = True
        return claim

    worker.attempts.claim = claim_then_flag
    kit.meter.reset()

    assert worker.process(msg.to_json(), clock.now()).status == "cancelled"

    assert ran == []
    assert "dynamodb.GetItem" not in kit.meter.snapshot()["requests"]
