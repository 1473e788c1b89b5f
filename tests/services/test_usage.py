"""Usage per tenant and day (on the fakes, metered as on moto): counted by the worker as deployed,
added once per invocation."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import jobsched.targets.demo  # noqa: F401
from jobsched.aws.clients import Clients  # noqa: F401
from jobsched.aws.metering import dynamo_for
from jobsched.aws.runs_store import RunsStore
from jobsched.aws.usage_store import UsageStore
from jobsched.compose.pipeline import worker_from_settings
from jobsched.core.messages import RunMessage
from jobsched.core.models import RetrySpec, Run, make_run_id
from jobsched.core.usage import DayUsage
from jobsched.services.deliveries import Delivery
from tests.aws.memory import memory_aws_units  # noqa: F401  (on the in-memory fakes)


def message(store: RunsStore, job_id: str, tenant: str, at, target: dict, **extra) -> RunMessage:
    run = Run(
        id=make_run_id(job_id, at), job_id=job_id, tenant=tenant, scheduled_at=at, due_at=at, created_at=at
    )
    store.create(run)
    return RunMessage(
        run_id=run.id, job_id=job_id, tenant=tenant, attempt=1, scheduled_at=at, due_at=at, target=target,
        payload={"kind": "permanent"}, retry=RetrySpec(max_attempts=1), **extra,
    )  # fmt: skip


def test_a_workers_runs_are_counted_per_tenant_and_day_and_added_once(aws, clock):
    """Given two acme runs that succeed, one that fails for good and one globex run, when the worker
    handles them and flushes, then acme's day holds 3 started, 2 succeeded, 1 failed, 1 dead-lettered,
    units and a cost; globex's 1 started; a second invocation's counts add to the same items."""
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "w1")
    store = RunsStore(deliveries.worker.attempts.dynamo, aws.settings.runs_table)
    at = clock.now()
    for i, (tenant, target) in enumerate(
        [("acme", {"handler": "demo.echo"}), ("acme", {"handler": "demo.echo"}),
         ("acme", {"handler": "demo.fail"}), ("globex", {"handler": "demo.echo"})]
    ):  # fmt: skip
        msg = message(store, f"job-{i}", tenant, at, target)
        deliveries.handle(Delivery.of(msg.to_json()), clock.now())
    assert deliveries.flush_usage() == 2
    # read back through a table of its own: the worker's meter would count this read (decision 0059)
    usage = UsageStore(dynamo_for(aws.settings, aws.clients.dynamodb), aws.settings.leases_table)
    [acme] = usage.tenant_days("acme", at.date(), at.date())
    assert (acme.day, acme.runs_started, acme.runs_succeeded, acme.runs_failed, acme.runs_dead_lettered) == (
        "2026-03-02",
        3,
        2,
        1,
        1,
    )
    assert acme.wru >= 6 and acme.estimated_usd(512) > 0
    assert deliveries.flush_usage() == 0  # nothing new counted
    again = worker_from_settings(aws.settings, aws.clients, clock, "w2")
    msg = message(store, "job-9", "acme", at + timedelta(minutes=1), {"handler": "demo.echo"})
    clock.advance(timedelta(minutes=1))
    again.handle(Delivery.of(msg.to_json()), clock.now())
    again.flush_usage()
    [acme] = usage.tenant_days("acme", at.date(), at.date())
    assert (acme.runs_started, acme.runs_succeeded) == (4, 3)
    assert [d.tenant for d in usage.all_days(at.date(), at.date())] == ["acme", "globex"]


def test_a_throttled_wait_is_counted(aws, clock):
    """Given a run whose key's only slot is held, when it is delivered, then acme's day counts one
    throttled wait and no started run."""
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "w1")
    store = RunsStore(deliveries.worker.attempts.dynamo, aws.settings.runs_table)
    one = {"concurrency": {"key": "k", "limit": 1}}
    held = message(store, "job-a", "acme", clock.now(), {"handler": "demo.echo"}, **one)
    assert deliveries.worker.limits.admit(held, clock.now(), None, None, "other").outcome is None
    waiting = message(store, "job-b", "acme", clock.now(), {"handler": "demo.echo"}, **one)
    assert deliveries.handle(Delivery.of(waiting.to_json()), clock.now()).status == "waiting"
    [day] = deliveries.usage.take()
    assert (day.throttled_waits, day.runs_started) == (1, 0)


def test_the_estimate_prices_units_and_run_seconds():
    """Given 10 WRU, 8 RRU, 5 SQS requests and 2 run-seconds at 1024 MB, then the estimate is their
    list prices."""
    usage = DayUsage(tenant="t", day="2026-03-02", wru=10, rru=8, sqs_requests=5, run_seconds=2)
    assert round(usage.estimated_usd(1024) * 1e6, 4) == round(
        10 * 0.625 + 8 * 0.125 + 5 * 0.4 + 2 * 13.3334, 4
    )


def test_every_started_attempt_is_counted_once_as_succeeded_failed_or_cancelled(aws, clock):
    """Given acme runs of demo.flaky (one planned failure, max_attempts 2), demo.fail (permanent) and a
    handler that is cancelled while it runs, when the worker handles every delivery, then the day
    (and a demo.echo run) counts 5 started = 2 succeeded + 2 failed (the retried attempt and the
    dead-lettered one) + 1 cancelled, and the CloudWatch metrics agree: RunsFailed 2."""
    from jobsched.runtime.observability import RUNS_CANCELLED, RUNS_FAILED, RUNS_SUCCEEDED, RecordingSink
    from jobsched.targets.registry import job, unregister
    from tests.aws.conftest_worker import sent_messages

    @job("test.usage-cancelled")
    def cancelled(payload, ctx):
        store.request_cancel(store.get(ctx.run_id))
        return "stopped" if ctx.cancel_event.wait(10) else "not cancelled"

    metrics = RecordingSink()
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "w1", metrics=metrics)
    store = RunsStore(deliveries.worker.attempts.dynamo, aws.settings.runs_table)
    at = clock.now()
    try:
        flaky = message(store, "job-flaky", "acme", at, {"handler": "demo.flaky"})
        flaky = replace(flaky, payload={"failures": 1}, retry=RetrySpec(max_attempts=2, base_seconds=1))
        assert deliveries.handle(Delivery.of(flaky.to_json()), clock.now()).status == "retrying"
        [(retry, _)] = sent_messages(aws)
        clock.advance(timedelta(seconds=2))
        assert deliveries.handle(Delivery.of(json.dumps(retry)), clock.now()).status == "succeeded"
        failing = message(store, "job-fail", "acme", at, {"handler": "demo.fail"})
        assert deliveries.handle(Delivery.of(failing.to_json()), clock.now()).status == "dead_lettered"
        stopped = message(store, "job-cancel", "acme", at, {"handler": "test.usage-cancelled"})
        assert deliveries.handle(Delivery.of(stopped.to_json()), clock.now()).status == "cancelled"
        echo = message(store, "job-echo", "acme", at, {"handler": "demo.echo"})
        assert deliveries.handle(Delivery.of(echo.to_json()), clock.now()).status == "succeeded"
    finally:
        unregister("test.usage-cancelled")
    [day] = deliveries.usage.take()
    counted = (day.runs_started, day.runs_succeeded, day.runs_failed, day.runs_cancelled)
    assert counted == (5, 2, 2, 1) and day.runs_dead_lettered == 1
    assert day.runs_started == day.runs_succeeded + day.runs_failed + day.runs_cancelled
    assert day.unaccounted() == 0
    cloudwatch = [metrics.count(n) for n in (RUNS_SUCCEEDED, RUNS_FAILED, RUNS_CANCELLED)]
    assert cloudwatch == [2, 2, 1]
