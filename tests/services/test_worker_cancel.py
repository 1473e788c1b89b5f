"""Prompt cancel of a running run (issue 10 §3, decision 0013): the cancel watch reads the flag every
``cancel_poll_seconds`` while the target runs, apart from the lease-extending heartbeat."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

from jobsched.core.models import RunState
from jobsched.services.deliveries import Delivery
from jobsched.services.usage import TenantMeter
from jobsched.targets.registry import job, unregister
from tests.aws.conftest_worker import Kit
from tests.aws.memory import memory_aws  # noqa: F401  (on the in-memory fakes)

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

    out = worker.handle(Delivery.of(msg.to_json()), clock.now())

    assert seen["cancelled"] is True
    assert seen["after"] < POLL + 0.5
    assert out.status == "cancelled"
    stored = kit.runs.get(run.id)
    assert stored.state is RunState.CANCELLED and stored.attempts[-1].outcome == "cancelled"
    requests = kit.meter.snapshot()["requests"]
    # the claim, the cancel request, the ending; the test's own reads (GetItem: the run, then the
    # cancel request's); the watch's batched reads
    assert requests["dynamodb.UpdateItem"] == 3
    assert requests["dynamodb.GetItem"] == 2
    assert 1 <= requests["dynamodb.BatchGetItem"] <= 3


def test_the_watch_reads_one_unit_per_period_only_while_the_target_runs(kit, clock, handler_slot):
    """Given a handler that runs about 1 s with a 0.2 s cancel watch and no cancellation,
    When it runs to the end,
    Then the watch made about one strongly consistent read per period (1 read unit each), nothing
    else was read, and the run succeeded."""
    _, msg = kit.new_run({"handler": "test.cancel-slot"}, {})
    handler_slot["fn"] = lambda payload, ctx: ctx.cancel_event.wait(1.0) or "done"
    worker = kit.worker(heartbeat=3600, cancel_poll_seconds=POLL)
    kit.meter.reset()

    assert worker.handle(Delivery.of(msg.to_json()), clock.now()).status == "succeeded"

    snap = kit.meter.snapshot()
    reads = snap["requests"]["dynamodb.BatchGetItem"]
    assert 3 <= reads <= 5  # 1.0 s / 0.2 s, give or take a period on a loaded machine
    assert snap["dynamodb"]["rcu"] == float(reads)
    assert set(snap["requests"]) == {"dynamodb.UpdateItem", "dynamodb.BatchGetItem"}
    time.sleep(3 * POLL)
    assert kit.meter.snapshot()["requests"]["dynamodb.BatchGetItem"] == reads  # stopped with the target


def test_a_run_shorter_than_the_period_pays_for_no_read(kit, clock):
    """Given the deployed cancel watch (1 s) and a handler that returns at once,
    When the run executes,
    Then the worker made its two writes and no read: short runs do not pay for prompt cancel."""
    _, msg = kit.new_run({"handler": "demo.echo"}, {"x": 1})
    kit.meter.reset()

    assert kit.worker(heartbeat=3600).handle(Delivery.of(msg.to_json()), clock.now()).status == "succeeded"

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

    assert worker.handle(Delivery.of(msg.to_json()), clock.now()).status == "cancelled"

    assert ran == []
    assert "dynamodb.BatchGetItem" not in kit.meter.snapshot()["requests"]


def test_the_runs_of_a_batch_share_one_read_request_and_each_pays_its_own_unit(aws, clock, handler_slot):
    """Given one worker executing five runs of two tenants at once (a Lambda batch's records), each
    running about 1.2 s, with a 0.2 s cancel watch and a per-tenant meter,
    When one of them is cancelled while they run,
    Then only that run ends cancelled; the flags were read in batches (far fewer requests than run
    reads: one request serves every run due at that moment), and each run's reads were billed to
    its own tenant, one read unit each, adding up to the meter's total."""
    meter = TenantMeter()
    kit = Kit(aws, clock, meter=meter)
    runs = [
        kit.new_run(
            {"handler": "test.cancel-slot"}, {"i": i}, job_id=f"job{i}", tenant=("acme", "beta")[i % 2]
        )
        for i in range(5)
    ]
    # The victim is one of beta's two runs: it stops early, so acme's three runs read more than beta's
    # one and the victim's few (with an acme victim the two tenants could tie: 12.0 > 12.0 in a CI run)
    victim = runs[1][0]
    started = threading.Barrier(5)

    def body(payload, ctx):
        started.wait(5.0)
        if payload["i"] == 1:
            kit.runs.request_cancel(kit.runs.get(victim.id))
        return "cancelled" if ctx.cancel_event.wait(1.2) else "done"

    handler_slot["fn"] = body
    worker = kit.worker(heartbeat=3600, cancel_poll_seconds=POLL)
    meter.reset()
    meter.take_tenant_units()

    outcomes = {}
    with ThreadPoolExecutor(max_workers=5) as pool:
        futures = {
            pool.submit(worker.handle, Delivery.of(msg.to_json()), clock.now()): run.id for run, msg in runs
        }
        for future, run_id in futures.items():
            outcomes[run_id] = future.result().status

    assert outcomes.pop(victim.id) == "cancelled"
    assert set(outcomes.values()) == {"succeeded"}
    snap = meter.snapshot()
    batches = snap["requests"]["dynamodb.BatchGetItem"]
    reads = meter.rcu["BatchGetItem"]  # one unit per run read
    assert reads >= 4 * 4 + 1  # four runs read about every 0.2 s for 1.2 s, the victim at least once
    assert batches < reads / 2  # shared: a watch of its own per run would make one request per read
    assert worker.cancel_board.requests == batches
    by_tenant = meter.take_tenant_units()
    assert set(by_tenant) == {"acme", "beta"}
    assert (
        sum(units["rru"] for units in by_tenant.values()) == snap["dynamodb"]["rcu"]
    )  # the victim's GetItem too
    assert by_tenant["acme"]["rru"] > by_tenant["beta"]["rru"] > 0  # three whole runs against one


def test_a_failed_batched_read_fails_no_run_and_is_tried_again(kit, clock, handler_slot):
    """Given a run whose first flag read fails (DynamoDB throttling),
    When the run is then cancelled,
    Then the next read, one period later, sees it: the failure cost a period, never the run."""
    run, msg = kit.new_run({"handler": "test.cancel-slot"}, {})
    worker = kit.worker(heartbeat=3600, cancel_poll_seconds=POLL)
    original = worker.attempts.cancel_flags
    calls = []

    def flaky(run_ids):
        calls.append(list(run_ids))
        if len(calls) == 1:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "BatchGetItem")
        return original(run_ids)

    worker.attempts.cancel_flags = flaky

    def cooperative(payload, ctx):
        kit.runs.request_cancel(kit.runs.get(run.id))
        return "stopped" if ctx.cancel_event.wait(5.0) else "not seen"

    handler_slot["fn"] = cooperative

    assert worker.handle(Delivery.of(msg.to_json()), clock.now()).status == "cancelled"
    assert calls == [[run.id], [run.id]]
