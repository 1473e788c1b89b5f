"""The worker with limits (on the in-memory fakes): a run over a concurrency or rate limit waits (no
attempt used, ``waiting_for`` on the run), starts as soon as a slot frees, and costs a bounded number
of requests per wait."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import timedelta

import pytest

from jobsched.aws.limits_store import Buckets, Semaphores, bucket_key, semaphore_key
from jobsched.aws.queues import RunQueues
from jobsched.aws.tenant_limits import TenantLimits
from jobsched.core.messages import RunMessage
from jobsched.core.phases import run_phases
from jobsched.services.deliveries import Delivery
from jobsched.services.limits import LimitGate
from tests.aws.conftest_worker import Kit, run_service, sent_messages
from tests.aws.memory import memory_aws  # noqa: F401  (this file runs on the in-memory fakes)

STRIPE = {"key": "stripe", "limit": 1}


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


def gate(kit: Kit, *, max_running: int = 0, per_second: float = 0.0, burst: int = 1) -> LimitGate:
    leases = kit.aws.settings.leases_table
    return LimitGate(
        semaphores=Semaphores(kit.dynamo, leases),
        buckets=Buckets(kit.dynamo, leases),
        tenants=TenantLimits(
            kit.dynamo,
            leases,
            default_max_running=max_running,
            default_per_second=per_second,
            default_burst=burst,
        ),
        attempts=kit.attempts,
        queues=RunQueues(kit.aws.clients.sqs, dict(kit.aws.settings.queue_urls), kit.meter),
        lease_seconds=60,
        rng=random.Random(3),
        metrics=kit.metrics,
        sleep=lambda s: kit.clock.advance(timedelta(seconds=s)),
    )


def limited_worker(kit: Kit, owner: str = "worker-a", **limits):
    worker = kit.worker(owner)
    worker.limits = gate(kit, **limits)
    return worker


def enqueue(kit: Kit, msg: RunMessage) -> dict:
    """Send ``msg`` to its queue and receive it, as the event source mapping would (body, receipt)."""
    url = kit.aws.settings.queue_url(msg.priority)
    kit.aws.clients.sqs.send_message(QueueUrl=url, MessageBody=msg.to_json())
    got = kit.aws.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=30)
    return {
        "body": got["Messages"][0]["Body"],
        "receipt_handle": got["Messages"][0]["ReceiptHandle"],
        "queue_url": url,
    }


def deliver(worker, kit: Kit, delivery: dict):
    return worker.handle(
        Delivery(
            message_id="",
            body=delivery["body"],
            receipt_handle=delivery["receipt_handle"],
            queue_url=delivery["queue_url"],
        ),
        kit.clock.now(),
    )


def visible(kit: Kit, kind: str = "default") -> list[dict]:
    url = kit.aws.settings.queue_url(kind)
    return kit.aws.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get(
        "Messages", []
    )


def test_a_run_over_its_concurrency_limit_waits_without_using_an_attempt(kit):
    """Given one run holding the only slot of key stripe, when a second run of the key is delivered,
    then it waits: deferred, its message hidden, the run still queued with attempt 0 and
    waiting_for concurrency:stripe; the API's view of it says so."""
    worker = limited_worker(kit)
    _, held = kit.new_run(job_id="job-a")
    holding = worker.limits.admit(replace(held, concurrency=STRIPE), kit.clock.now(), None, None, "other")
    assert holding.outcome is None
    run, msg = kit.new_run(job_id="job-b")
    out = deliver(worker, kit, enqueue(kit, replace(msg, concurrency=STRIPE)))
    assert (out.status, out.defer) == ("waiting", True)
    assert out.detail["waiting_for"] == "concurrency:stripe" and out.detail["woken_by_release"] is True
    stored = kit.attempts.get(run.id)
    assert (stored.state, stored.attempt, stored.waiting_for, stored.waits) == (
        "queued",
        0,
        "concurrency:stripe",
        1,
    )
    assert visible(kit) == []


@pytest.mark.parametrize(("receive_count", "resent"), [(3, False), (4, True), (7, True)])
def test_a_wait_near_the_redrive_re_sends_the_message_instead_of_hiding_it(kit, receive_count, resent):
    """Given the only slot of key stripe held, when a run of the key is delivered for the
    receive_count-th time (its queue redrives to the DLQ at the 5th receive), then before the 4th it
    waits hidden as usual (deferred, its receipt registered to be woken); from the 4th on the worker
    sends a fresh copy of its message, delayed by the wait, and lets the delivered one be deleted
    (not deferred, nothing to wake): waiting never spends the receives that would make the DLQ
    consumer record a run that only waited as poison."""
    worker = limited_worker(kit)
    _, held = kit.new_run(job_id="job-a")
    assert (
        worker.limits.admit(replace(held, concurrency=STRIPE), kit.clock.now(), None, None, "o").outcome
        is None
    )
    run, msg = kit.new_run(job_id="job-b")
    delivery = enqueue(kit, replace(msg, concurrency=STRIPE))
    before = [b for b, _ in sent_messages(kit.aws) if b["run_id"] == run.id]
    out = worker.handle(
        Delivery(
            message_id="",
            body=delivery["body"],
            receipt_handle=delivery["receipt_handle"],
            queue_url=delivery["queue_url"],
            receive_count=receive_count,
        ),
        kit.clock.now(),
    )
    copies = [(b, d) for b, d in sent_messages(kit.aws) if b["run_id"] == run.id]
    assert out.status == "waiting" and out.detail["waiting_for"] == "concurrency:stripe"
    assert out.defer is not resent
    assert out.detail["woken_by_release"] is not resent
    assert len(copies) == len(before) + (1 if resent else 0)
    if resent:
        body, delay = copies[-1]
        assert delay == out.detail["retry_in"] and body["attempt"] == msg.attempt
    assert kit.attempts.get(run.id).waits == 1


def test_a_release_makes_the_waiting_run_visible_at_once_and_it_runs(kit):
    """Given a run waiting for the slot another run holds, when the holder releases, then the waiting
    run's message is visible again at once (not after its hidden minute), and delivered, it runs:
    succeeded with attempt 1, waiting_for cleared and its one wait kept in its history."""
    worker = limited_worker(kit)
    _, held = kit.new_run(job_id="job-a")
    holding = worker.limits.admit(replace(held, concurrency=STRIPE), kit.clock.now(), None, None, "other")
    run, msg = kit.new_run(job_id="job-b")
    first = enqueue(kit, replace(msg, concurrency=STRIPE))
    assert deliver(worker, kit, first).status == "waiting"
    holding.release(kit.clock.now())
    again = visible(kit)
    assert [json.loads(m["Body"])["run_id"] for m in again] == [run.id]
    out = worker.handle(Delivery.of(again[0]["Body"]), kit.clock.now())
    assert out.status == "succeeded"
    stored = kit.attempts.get(run.id)
    assert (stored.attempt, stored.waiting_for, stored.waits) == (1, None, 1)
    assert (
        Semaphores(kit.dynamo, kit.aws.settings.leases_table).holders(semaphore_key("acme", "stripe")) == {}
    )


def test_a_finished_run_frees_its_slot(kit):
    """Given a limit of 1, when two runs are delivered one after the other (the first finished), then
    both run: the first one's slot was freed when it ended."""
    worker = limited_worker(kit)
    for job in ("job-a", "job-b"):
        _, msg = kit.new_run(job_id=job)
        assert (
            worker.handle(Delivery.of(replace(msg, concurrency=STRIPE).to_json()), kit.clock.now()).status
            == "succeeded"
        )


def test_one_wait_costs_four_requests(kit):
    """Given a full semaphore, when a run waits, then the wait costs 4 requests: the refused acquire,
    the waiter registration, the run's waiting mark and the visibility change."""
    worker = limited_worker(kit)
    _, held = kit.new_run(job_id="job-a")
    worker.limits.admit(replace(held, concurrency=STRIPE), kit.clock.now(), None, None, "other")
    worker.limits.tenants.effective("acme")  # the tenant's limits are cached per container
    _, msg = kit.new_run(job_id="job-b")
    delivery = enqueue(kit, replace(msg, concurrency=STRIPE))
    kit.meter.reset()
    deliver(worker, kit, delivery)
    assert dict(kit.meter.requests) == {
        "dynamodb.UpdateItem": 3,
        "sqs.ChangeMessageVisibility": 1,
    }


def test_the_tenant_limit_holds_across_jobs(kit):
    """Given a deployment default of 1 concurrent run per tenant, when a run of acme holds it, then
    another acme run waits for concurrency:@tenant while a globex run starts."""
    worker = limited_worker(kit, max_running=1)
    _, held = kit.new_run(job_id="job-a")
    assert worker.limits.admit(held, kit.clock.now(), None, None, "other").outcome is None
    _, acme = kit.new_run(job_id="job-b")
    out = worker.handle(Delivery.of(acme.to_json()), kit.clock.now())
    assert (out.status, out.detail["waiting_for"]) == ("waiting", "concurrency:@tenant")
    _, globex = kit.new_run(job_id="job-c", tenant="globex")
    assert worker.handle(Delivery.of(globex.to_json()), kit.clock.now()).status == "succeeded"


def test_an_operators_tenant_limit_overrides_the_default(kit):
    """Given no default and an operator's max_running of 1 for acme, when one acme run holds it,
    then a second acme run waits."""
    worker = limited_worker(kit)
    worker.limits.tenants.put("acme", kit.clock.now(), max_running=1, per_second=None, burst=None)
    _, held = kit.new_run(job_id="job-a")
    assert worker.limits.admit(held, kit.clock.now(), None, None, "other").outcome is None
    _, msg = kit.new_run(job_id="job-b")
    assert (
        worker.handle(Delivery.of(msg.to_json()), kit.clock.now()).detail["waiting_for"]
        == "concurrency:@tenant"
    )


def test_a_run_cancelled_while_it_waits_is_acknowledged(kit):
    """Given a waiting run, when it is cancelled and its message comes back, then the delivery is
    acknowledged (finished) without a claim, and the slot it never held stays with the holder."""
    worker = limited_worker(kit)
    _, held = kit.new_run(job_id="job-a")
    worker.limits.admit(replace(held, concurrency=STRIPE), kit.clock.now(), None, None, "other")
    run, msg = kit.new_run(job_id="job-b")
    body = replace(msg, concurrency=STRIPE).to_json()
    assert worker.handle(Delivery.of(body), kit.clock.now()).status == "waiting"
    run_service(kit).cancel("acme", run.id, kit.clock.now())
    out = worker.handle(Delivery.of(body), kit.clock.now())
    assert (out.status, out.defer) == ("finished", False)
    assert kit.attempts.get(run.id).state == "cancelled"


def test_a_run_over_its_rate_is_re_sent_for_its_booking_and_starts_then(kit):
    """Given a bucket of one run per 5 s, when two runs are delivered at once, then the first runs and
    the second is re-sent to arrive at its booked instant (5-6 s later, jittered), marked booked,
    with waiting_for rate:stripe on the run; delivered then, it runs without asking the bucket."""
    worker = limited_worker(kit)
    limit = {"key": "stripe", "per_second": 0.2, "burst": 1}
    _, first = kit.new_run(job_id="job-a")
    assert (
        worker.handle(Delivery.of(replace(first, rate_limit=limit).to_json()), kit.clock.now()).status
        == "succeeded"
    )
    run, second = kit.new_run(job_id="job-b")
    out = worker.handle(Delivery.of(replace(second, rate_limit=limit).to_json()), kit.clock.now())
    assert (out.status, out.defer) == ("waiting", False)
    assert 5.0 <= out.detail["starts_in"] <= 6.0
    [(body, delay)] = [(b, d) for b, d in sent_messages(kit.aws) if b["run_id"] == run.id]
    assert body["booked"] is True and delay == 5
    assert kit.attempts.get(run.id).waiting_for == "rate:stripe"
    bucket = kit.dynamo.get(kit.aws.settings.leases_table, {"lease_key": bucket_key("acme", "stripe")})
    kit.clock.advance(timedelta(seconds=out.detail["starts_in"]))
    kit.meter.reset()
    assert worker.handle(Delivery.of(json.dumps(body)), kit.clock.now()).status == "succeeded"
    assert (
        kit.dynamo.get(kit.aws.settings.leases_table, {"lease_key": bucket_key("acme", "stripe")}) == bucket
    )


def test_a_booking_within_a_second_is_slept_out(kit):
    """Given a bucket of 2 runs per second, when two runs are delivered at once, then the second
    sleeps half a second in the worker and runs (no re-send)."""
    worker = limited_worker(kit)
    limit = {"key": "stripe", "per_second": 2, "burst": 1}
    start = kit.clock.now()
    for job in ("job-a", "job-b"):
        _, msg = kit.new_run(job_id=job)
        assert (
            worker.handle(Delivery.of(replace(msg, rate_limit=limit).to_json()), kit.clock.now()).status
            == "succeeded"
        )
    assert kit.clock.now() - start == timedelta(milliseconds=500)


def test_a_slept_out_booking_starts_and_is_recorded_at_its_booked_instant(kit):
    """Given a bucket of 2 runs per second and two runs delivered at the same instant, when the
    second sleeps out its half-second booking, then its attempt is recorded as started half a
    second after the first (at the booking, not at the delivery: the recorded starts keep to the
    rate) and its lease runs from then."""
    worker = limited_worker(kit)
    limit = {"key": "stripe", "per_second": 2, "burst": 1}
    delivered = kit.clock.now()
    runs = []
    for job in ("job-a", "job-b"):
        run, msg = kit.new_run(job_id=job)
        runs.append(run)
        assert (
            worker.handle(Delivery.of(replace(msg, rate_limit=limit).to_json()), delivered).status
            == "succeeded"
        )
    first, second = (kit.attempts.get(r.id) for r in runs)
    assert first.attempts[0].started_at == delivered
    assert second.attempts[0].started_at == delivered + timedelta(milliseconds=500)


def test_the_sweeper_leaves_a_waiting_run_alone(kit):
    """Given a run past due that waits for a slot until a minute from now, when the sweeper's rule
    judges it 10 minutes after its due instant, then it is not stranded until its wait is over."""
    from jobsched.core.sweeping import stranded_kind

    worker = limited_worker(kit)
    _, held = kit.new_run(job_id="job-a")
    worker.limits.admit(replace(held, concurrency=STRIPE), kit.clock.now(), None, None, "other")
    kit.clock.advance(timedelta(minutes=10))
    run, msg = kit.new_run(job_id="job-b", scheduled_at=kit.clock.now() - timedelta(minutes=10))
    worker.limits.semaphores.renew(
        semaphore_key("acme", "stripe"), f"{held.run_id}@other", 1, kit.clock.now(), 60
    )
    assert (
        worker.handle(Delivery.of(replace(msg, concurrency=STRIPE).to_json()), kit.clock.now()).status
        == "waiting"
    )
    item = kit.attempts.get_item(run.id)
    assert stranded_kind(item, kit.clock.now(), timedelta(minutes=2)) is None
    later = kit.clock.now() + timedelta(minutes=4)
    assert stranded_kind(item, later, timedelta(minutes=2)) == "resend"


def test_the_waits_of_a_run_are_kept_per_attempt_and_become_its_waiting_phase(kit):
    """Given a run held by a limit twice, 10 s apart, then started 20 s after its first wait
    (decision 0064), then its item keeps the first wait of attempt 1 (the wait's own write: no other
    write), and its phases read queued, waiting from the first wait, running."""
    worker = limited_worker(kit)
    _, held = kit.new_run(job_id="job-a")
    holding = worker.limits.admit(replace(held, concurrency=STRIPE), kit.clock.now(), None, None, "other")
    run, msg = kit.new_run(job_id="job-b")
    kit.clock.advance(timedelta(seconds=5))
    first_wait = kit.clock.now()
    assert deliver(worker, kit, enqueue(kit, replace(msg, concurrency=STRIPE))).status == "waiting"
    kit.clock.advance(timedelta(seconds=10))
    assert deliver(worker, kit, enqueue(kit, replace(msg, concurrency=STRIPE))).status == "waiting"
    kit.clock.advance(timedelta(seconds=10))
    holding.release(kit.clock.now())
    started = kit.clock.now()
    assert worker.handle(Delivery.of(visible(kit)[0]["Body"]), started).status == "succeeded"
    stored = kit.attempts.get(run.id)
    assert stored.waits == 2 and stored.limit_waits == {1: first_wait}
    assert [(p.phase, p.start, p.end) for p in run_phases(stored)] == [
        ("queued", run.due_at, first_wait),
        ("waiting", first_wait, started),
        ("running", started, started),
    ]
