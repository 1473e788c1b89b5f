"""Spend caps' former gaps (issue 32 §3, decision 0062 amended), on the in-memory fakes with fixed
aware instants: a run queued ahead before its tenant reached its budget is recorded skipped (reason
budget) by the worker instead of starting, its job rewound to it so that raising the cap decides it
under the misfire policy; a tenant without a budget costs its runs no read; a retry finishes; manual
triggers, backfills and replays of a capped tenant are refused with nothing written."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pytest

import jobsched.targets.demo  # noqa: F401  (registers demo.*)
from jobsched.aws.backfill_store import BackfillStore
from jobsched.aws.budget_store import BudgetStore
from jobsched.aws.metering import dynamo_for
from jobsched.aws.usage_store import UsageStore
from jobsched.compose.pipeline import (
    backfill_service_from_settings,
    budget_service_from_settings,
    worker_from_settings,
)
from jobsched.core.clock import FakeClock
from jobsched.core.errors import BudgetExhaustedError
from jobsched.core.models import RunState, Trigger, make_run_id
from jobsched.core.usage import DayUsage
from jobsched.runtime.observability import RecordingSink
from jobsched.services.backfills import BackfillMessage
from jobsched.services.budgets import BudgetGate
from jobsched.services.dead_letters import DeadLetterService
from jobsched.services.deliveries import Delivery
from jobsched.services.job_history import job_history
from jobsched.services.runs import RunService
from jobsched.targets.registry import RegistryCatalog
from tests.aws.conftest import T0
from tests.aws.memory import build_pipeline, memory_aws, memory_pipeline  # noqa: F401  (on the in-memory fakes)

EVERY_MINUTE = {"name": "tick", "schedule": "* * * * *", "target": {"handler": "demo.echo"}}


class Gaps:
    """The pipeline's dispatcher and a worker wired as deployed (worker_from_settings), both with
    spend caps, on one fake clock; budgets and usage written directly."""

    def __init__(self, pipeline, clock: FakeClock):
        self.pipeline = pipeline
        self.clock = clock
        env = pipeline.env
        self.settings = env.settings
        self.dynamo = dynamo_for(env.settings, env.clients.dynamodb)
        self.service = budget_service_from_settings(env.settings, self.dynamo)
        self.budgets = BudgetStore(self.dynamo, env.settings.leases_table)
        self.usage = UsageStore(self.dynamo, env.settings.leases_table)
        pipeline.dispatcher.budgets = BudgetGate(self.service)
        pipeline.jobs.catalog = RegistryCatalog()  # the worker runs the demo handlers
        self.metrics = RecordingSink()
        self.deliveries = worker_from_settings(
            env.settings, env.clients, clock, "worker-a", metrics=self.metrics
        )
        self.worker = self.deliveries.worker

    def cap(self, tenant: str = "acme") -> float:
        """The tenant spent twice its budget (set through the service: every gate forgets it)."""
        usage = DayUsage(tenant=tenant, day="2026-03-02", run_seconds=1000.0)
        self.usage.add(usage)
        spent = usage.estimated_usd(self.service.memory_mb)
        self.service.set(tenant, spent / 2, T0 - timedelta(minutes=5))
        return spent

    def spend_only(self, tenant: str = "acme") -> float:
        """The tenant spent something today (no budget set); returns the spend."""
        usage = DayUsage(tenant=tenant, day="2026-03-02", run_seconds=1000.0)
        self.usage.add(usage)
        return usage.estimated_usd(self.service.memory_mb)

    def tick(self, job, at):
        return self.pipeline.dispatcher.dispatch_shard(self.pipeline.dispatcher.shard_of(job.id), at)

    def run(self, job, at):
        return self.pipeline.dispatcher.runs.find(make_run_id(job.id, at))

    def message_of(self, job, at) -> dict:
        run_id = make_run_id(job.id, at)
        [body] = [m["body"] for m in self.pipeline.messages() if m["body"]["run_id"] == run_id][-1:]
        return body

    def deliver(self, body: dict, at):
        self.clock.set(at)
        return self.worker.handle(Delivery.of(json.dumps(body)), at)


@pytest.fixture
def gaps(pipeline, clock):
    return Gaps(pipeline, clock)


def _queued_ahead(gaps, tenant: str = "acme", spec=None):
    """A job every minute whose 12:00 run a tick at 11:59:40 queued ahead (due in 20 s)."""
    job = gaps.pipeline.jobs.create(tenant, spec or EVERY_MINUTE, T0 - timedelta(minutes=1, seconds=30))
    gaps.tick(job, T0 - timedelta(seconds=20))
    assert gaps.run(job, T0).state is RunState.QUEUED
    return job


def test_a_run_queued_ahead_is_skipped_for_the_budget_when_its_tenant_is_capped_before_it_starts(gaps):
    # Given acme (with a budget) has its 12:00 run queued ahead, its message marked budgeted
    gaps.service.set("acme", 1000.0, T0 - timedelta(hours=1))
    job = _queued_ahead(gaps)
    body = gaps.message_of(job, T0)
    assert body["budgeted"] is True
    # When acme goes over its budget, and the message is delivered at 12:00
    gaps.cap()
    outcome = gaps.deliver(body, T0)
    # Then the run is skipped with reason budget, never claimed, counted in RunsSkippedBudget
    run = gaps.run(job, T0)
    assert (run.state, run.skip_reason, run.attempt, run.attempts) == (RunState.SKIPPED, "budget", 0, [])
    assert outcome.status == "finished" and outcome.detail == {"skipped": "budget"}
    assert gaps.metrics.count("RunsSkippedBudget") == 1
    # And the job's cursor went back to that occurrence, where the dispatcher holds it while capped
    assert gaps.pipeline.dispatcher.jobs.get("acme", job.id).next_due_at == T0
    held = gaps.tick(job, T0 + timedelta(seconds=1))
    assert held.jobs_capped == 1


def test_the_job_history_shows_the_skipped_queued_ahead_run_with_reason_budget(gaps):
    gaps.service.set("acme", 1000.0, T0 - timedelta(hours=1))
    job = _queued_ahead(gaps)
    gaps.cap()
    gaps.deliver(gaps.message_of(job, T0), T0)
    page = job_history(
        gaps.pipeline.dispatcher.jobs,
        gaps.pipeline.dispatcher.runs,
        "acme",
        job.id,
        now=T0 + timedelta(seconds=30),
    )
    [record] = [r for r in page.runs if r.scheduled_at == T0]
    assert (record.state, record.skip_reason) == (RunState.SKIPPED, "budget")


def test_raising_the_cap_decides_the_skipped_queued_ahead_occurrence_under_the_misfire_policy(gaps):
    # Given acme's queued-ahead 12:00 run skipped by the worker (budget), and the job held to 12:02
    gaps.service.set("acme", 1000.0, T0 - timedelta(hours=1))
    job = _queued_ahead(gaps)
    spent = gaps.cap()
    gaps.deliver(gaps.message_of(job, T0), T0)
    for minute in (1, 2):
        gaps.tick(job, T0 + timedelta(minutes=minute, seconds=1))
    # When the cap is raised and the next tick comes at 12:03:01
    gaps.service.set("acme", spent * 10, T0 + timedelta(minutes=3))
    summary = gaps.tick(job, T0 + timedelta(minutes=3, seconds=1))
    # Then under run_once the latest missed occurrence runs as a catch-up and the older ones, the
    # worker's 12:00 record included, are revived in place as skipped with reason misfire
    latest = gaps.run(job, T0 + timedelta(minutes=2))
    assert (latest.state, latest.trigger) == (RunState.QUEUED, Trigger.CATCHUP)
    for minute in (0, 1):
        run = gaps.run(job, T0 + timedelta(minutes=minute))
        assert (run.state, run.skip_reason) == (RunState.SKIPPED, "misfire")
    assert summary.skipped_by_reason == Counter({"misfire": 2})
    assert gaps.run(job, T0 + timedelta(minutes=3)).state is RunState.QUEUED


def test_under_run_all_every_skipped_queued_ahead_occurrence_runs_once_the_cap_is_cleared(gaps):
    gaps.service.set("acme", 1000.0, T0 - timedelta(hours=1))
    job = _queued_ahead(gaps, spec=EVERY_MINUTE | {"misfire_policy": "run_all"})
    gaps.cap()
    gaps.deliver(gaps.message_of(job, T0), T0)
    gaps.service.clear("acme")
    gaps.tick(job, T0 + timedelta(minutes=2, seconds=1))
    run = gaps.run(job, T0)
    assert (run.state, run.trigger) == (RunState.QUEUED, Trigger.CATCHUP)


def test_a_tenant_without_a_budget_costs_its_runs_no_budget_read(gaps):
    # Given globex has no budget: its messages are not marked, and the worker's gate reads nothing
    job = _queued_ahead(gaps, tenant="globex")
    body = gaps.message_of(job, T0)
    assert "budgeted" not in body
    outcome = gaps.deliver(body, T0)
    assert outcome.status == "succeeded"
    assert gaps.worker.budget_cap is not None and gaps.worker.budget_cap.gate.reads == 0  # type: ignore[attr-defined]


def test_a_retry_of_a_capped_tenants_run_is_a_run_under_way_and_finishes(gaps):
    # Given acme's 12:00 run (budgeted) whose first attempt failed with a retryable error
    gaps.service.set("acme", 1000.0, T0 - timedelta(hours=1))
    spec = EVERY_MINUTE | {"target": {"handler": "demo.fail"}, "payload": {"kind": "retryable"}}
    job = _queued_ahead(gaps, spec=spec | {"retry": {"max_attempts": 3}})
    assert gaps.deliver(gaps.message_of(job, T0), T0).status == "retrying"
    # When acme goes over its budget and the second attempt's message comes
    gaps.cap()
    [retry] = [m["body"] for m in gaps.pipeline.messages() if m["body"]["attempt"] == 2]
    assert retry["budgeted"] is True
    outcome = gaps.deliver(retry, T0 + timedelta(minutes=5))
    # Then the second attempt ran (and failed again): not skipped for the budget
    assert outcome.status == "retrying"
    run = gaps.run(job, T0)
    assert (run.attempt, run.skip_reason) == (2, None)
    assert gaps.metrics.count("RunsSkippedBudget") == 0


def test_a_run_another_delivery_already_started_is_not_skipped(gaps):
    gaps.service.set("acme", 1000.0, T0 - timedelta(hours=1))
    job = _queued_ahead(gaps)
    body = gaps.message_of(job, T0)
    assert body["budgeted"] is True
    assert gaps.deliver(body, T0).status == "succeeded"
    gaps.cap()
    again = gaps.deliver(body, T0 + timedelta(seconds=5))  # a duplicate delivery
    assert again.status == "finished" and again.detail == {}
    assert gaps.run(job, T0).state is RunState.SUCCEEDED


def test_an_edit_re_sends_a_budgeted_tenants_queued_ahead_runs_marked_and_the_worker_skips_them(gaps):
    # Given acme (with a budget) has its 12:00 run queued ahead, then its payload is edited
    gaps.service.set("acme", 1000.0, T0 - timedelta(hours=1))
    job = _queued_ahead(gaps)
    gaps.pipeline.jobs.update("acme", job.id, {"payload": {"n": 2}}, job.version, T0 - timedelta(seconds=10))
    # Then the message the edit sent (the only one that may run the run) is marked too
    body = gaps.message_of(job, T0)
    assert body["payload"] == {"n": 2} and body["budgeted"] is True
    # And when acme is capped, the worker skips the run on that message
    gaps.cap()
    gaps.deliver(body, T0)
    assert gaps.run(job, T0).skip_reason == "budget"


def test_a_budget_set_while_a_gate_reads_is_not_hidden_by_that_read(gaps):
    # Given a gate whose read of acme's budget item is overtaken by an administrator's set (the API
    # forgets acme in every gate of the process while the read is under way)
    spent = gaps.spend_only()
    gate = BudgetGate(gaps.service)
    real = gaps.service.budgets

    class Racing:
        def get(self, tenant):
            found = real.get(tenant)  # read before the set: no budget
            gaps.service.budgets = real
            gaps.service.set(tenant, spent / 2, T0)  # the set lands, and forgets acme
            return found

    gaps.service.budgets = Racing()
    # When the gate reads (and answers "not capped", what it read)
    assert gate.capped("acme", T0) is False
    # Then it did not keep that stale answer: the next ask, within the minute, reads the budget
    assert gate.capped("acme", T0 + timedelta(seconds=1)) is True


# --- on demand: triggers, backfills, replays ---------------------------------------------------------


def test_a_trigger_of_a_capped_tenant_is_refused_and_writes_nothing(gaps):
    job = gaps.pipeline.jobs.create("acme", EVERY_MINUTE | {"schedule": "0 0 1 1 *"}, T0)
    before = gaps.pipeline.jobs.runs_of("acme", job.id)[0]
    gaps.cap()
    with pytest.raises(BudgetExhaustedError) as refused:
        gaps.pipeline.jobs.trigger("acme", job.id, T0)
    assert refused.value.code == "budget_exhausted"
    message = refused.value.message
    assert "PUT /admin/tenants/acme/budget" in message and "monthly budget of" in message
    assert gaps.pipeline.jobs.runs_of("acme", job.id)[0] == before == []
    # And globex, without a budget, triggers as before
    other = gaps.pipeline.jobs.create("globex", EVERY_MINUTE | {"schedule": "0 0 1 1 *"}, T0)
    assert gaps.pipeline.jobs.trigger("globex", other.id, T0).state is RunState.QUEUED


def test_a_backfill_of_a_capped_tenant_is_refused_and_writes_nothing(gaps):
    job = gaps.pipeline.jobs.create("acme", EVERY_MINUTE | {"schedule": "0 * * * *"}, T0)
    before = gaps.pipeline.jobs.runs_of("acme", job.id)[0]  # its 12:00 run, dispatched when created
    gaps.cap()
    with pytest.raises(BudgetExhaustedError):
        gaps.pipeline.jobs.backfill("acme", job.id, T0 - timedelta(hours=3), T0 - timedelta(hours=1), T0)
    assert gaps.pipeline.jobs.runs_of("acme", job.id)[0] == before


def test_an_asynchronous_backfill_stops_when_its_tenant_reaches_its_budget(gaps):
    # Given an accepted backfill of acme's hourly job, then acme goes over its budget
    job = gaps.pipeline.jobs.create("acme", EVERY_MINUTE | {"schedule": "0 * * * *"}, T0)
    before = gaps.pipeline.jobs.runs_of("acme", job.id)[0]  # its 12:00 run, dispatched when created
    backfills = backfill_service_from_settings(gaps.settings, gaps.pipeline.env.clients)
    job_read, instants = gaps.pipeline.jobs.backfill_plan("acme", job.id, T0 - timedelta(hours=5), T0)
    record, _ = backfills.start(job_read, T0 - timedelta(hours=5), T0, len(instants), T0)
    gaps.cap()
    # When the worker takes its message
    body = BackfillMessage("acme", job.id, record.id).to_json()
    outcome = backfills.handle(Delivery.of(body), T0)
    # Then no run was made and the backfill failed, saying why
    assert outcome.detail["reason"] == "budget"
    stored = BackfillStore(gaps.dynamo, gaps.settings.runs_table).get("acme", job.id, record.id)
    assert str(stored.state) == "failed" and "monthly budget" in (stored.error or "")
    assert gaps.pipeline.jobs.runs_of("acme", job.id)[0] == before


def _dead_letter(gaps):
    """acme's run failed for good (a permanent error), in the dead letters; a RunService with caps."""
    job = gaps.pipeline.jobs.create(
        "acme",
        {
            "name": "f",
            "schedule": "0 0 1 1 *",
            "target": {"handler": "demo.fail"},
            "payload": {"kind": "permanent"},
        },
        T0,
    )
    run = gaps.pipeline.jobs.trigger("acme", job.id, T0)
    [body] = [m["body"] for m in gaps.pipeline.messages() if m["body"]["run_id"] == run.id]
    assert gaps.deliver(body, T0).status == "dead_lettered"
    service = RunService(
        runs=gaps.pipeline.dispatcher.runs,
        attempts=gaps.worker.attempts,
        jobs=gaps.pipeline.dispatcher.jobs,
        outputs=gaps.worker.outputs,
        queues=gaps.pipeline.dispatcher.queues,
        budgets=gaps.pipeline.dispatcher.budgets,
    )
    return run, service


def test_a_replay_of_a_capped_tenants_dead_letter_is_refused_and_it_stays_a_dead_letter(gaps):
    run, service = _dead_letter(gaps)
    gaps.cap()
    letters = DeadLetterService(service)
    with pytest.raises(BudgetExhaustedError):
        letters.replay("acme", run.id, T0 + timedelta(seconds=10))
    with pytest.raises(BudgetExhaustedError):
        service.retry("acme", run.id, T0 + timedelta(seconds=10))
    assert gaps.pipeline.dispatcher.runs.find(run.id).state is RunState.FAILED
    assert [v["run_id"] for v in letters.list("acme")[0]] == [run.id]


def test_a_replay_of_matching_dead_letters_of_a_capped_tenant_is_refused_before_any(gaps):
    run, service = _dead_letter(gaps)
    gaps.cap()
    with pytest.raises(BudgetExhaustedError):
        DeadLetterService(service).replay_matching("acme", T0 + timedelta(seconds=10))
    stored = gaps.pipeline.dispatcher.runs.find(run.id)
    assert (stored.state, stored.replays) == (RunState.FAILED, [])


def test_raising_the_cap_lets_a_trigger_through_at_once_in_the_same_process(gaps):
    job = gaps.pipeline.jobs.create("acme", EVERY_MINUTE | {"schedule": "0 0 1 1 *"}, T0)
    spent = gaps.cap()
    with pytest.raises(BudgetExhaustedError):
        gaps.pipeline.jobs.trigger("acme", job.id, T0)
    gaps.service.set("acme", spent * 10, T0)
    assert gaps.pipeline.jobs.trigger("acme", job.id, T0).state is RunState.QUEUED
