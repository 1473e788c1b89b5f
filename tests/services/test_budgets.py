"""Spend caps in the dispatcher (issue 32 §3, decision 0062), on the in-memory fakes with fixed aware
instants: a capped tenant's due occurrences are recorded skipped (reason budget) and its jobs held;
runs already running are untouched; raising the cap, clearing it or a new month resumes dispatch under
each job's misfire policy, reviving the budget records in place; at 80 % the tenant's owners are told
once per month; the gate reads a tenant's state once per TTL."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from functions.dispatcher import skipped_metrics
from jobsched.aws.budget_store import BudgetStore
from jobsched.aws.metering import dynamo_for
from jobsched.aws.notify_store import TenantSettingsStore
from jobsched.aws.usage_store import UsageStore
from jobsched.compose.pipeline import budget_service_from_settings, notifier_from_settings
from jobsched.core.budgets import marker_key
from jobsched.core.models import RunState, Trigger, make_run_id
from jobsched.core.usage import DayUsage
from jobsched.services.budgets import BudgetGate, BudgetWarnings
from tests.aws.conftest import T0
from tests.aws.memory import build_pipeline, memory_aws, memory_pipeline  # noqa: F401  (on the in-memory fakes)

EVERY_MINUTE = {"name": "tick", "schedule": "* * * * *", "target": {"handler": "echo"}}
TTL = 60.0


class _Hook(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.seen.append(json.loads(self.rfile.read(length) or b"null"))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def hook():
    _Hook.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/budget", _Hook
    server.shutdown()
    server.server_close()


class Caps:
    """The pipeline's dispatcher with a gate of a one-minute TTL, warning through the dead-letter
    notifier (webhooks to 127.0.0.1 allowed)."""

    def __init__(self, pipeline):
        self.pipeline = pipeline
        env = pipeline.env
        self.settings = replace(env.settings, allowed_http_hosts=("127.0.0.1",))
        self.dynamo = dynamo_for(self.settings, env.clients.dynamodb)
        self.service = budget_service_from_settings(self.settings, self.dynamo)
        self.usage = UsageStore(self.dynamo, self.settings.leases_table)
        self.budgets = BudgetStore(self.dynamo, self.settings.leases_table)
        self.gate = BudgetGate(
            self.service,
            ttl_seconds=TTL,
            warnings=BudgetWarnings(
                self.dynamo,
                self.settings.runs_table,
                lambda: notifier_from_settings(self.settings, env.clients, self.dynamo),
            ),
        )
        pipeline.dispatcher.budgets = self.gate

    def spend(self, tenant: str, day: str, seconds: float) -> float:
        usage = DayUsage(tenant=tenant, day=day, run_seconds=seconds)
        self.usage.add(usage)
        return usage.estimated_usd(self.service.memory_mb)

    def tick(self, job, at):
        return self.pipeline.dispatcher.dispatch_shard(self.pipeline.dispatcher.shard_of(job.id), at)

    def run(self, job, at):
        return self.pipeline.dispatcher.runs.find(make_run_id(job.id, at))


@pytest.fixture
def caps(pipeline):
    return Caps(pipeline)


def _capped(caps, tenant="acme", day="2026-03-02"):
    """The tenant spent twice its budget this month."""
    spent = caps.spend(tenant, day, 1000.0)
    caps.budgets.put(tenant, spent / 2, T0)
    return spent


def test_a_capped_tenants_occurrences_are_recorded_skipped_budget_and_its_job_held(caps):
    # Given acme over its budget, and jobs of acme and globex every minute
    _capped(caps)
    acme = caps.pipeline.jobs.create("acme", EVERY_MINUTE, T0 - timedelta(seconds=30))
    globex = caps.pipeline.jobs.create("globex", EVERY_MINUTE, T0 - timedelta(seconds=30))
    before = caps.pipeline.dispatcher.jobs.get("acme", acme.id)
    # When ticks come at 12:00:01 and 12:01:01
    first = caps.tick(acme, T0 + timedelta(seconds=1))
    second = caps.tick(acme, T0 + timedelta(minutes=1, seconds=1))
    if caps.pipeline.dispatcher.shard_of(globex.id) != caps.pipeline.dispatcher.shard_of(acme.id):
        caps.tick(globex, T0 + timedelta(minutes=1, seconds=1))
    # Then acme's 12:00 and 12:01 are skipped with reason budget, each once, nothing queued for them
    for at in (T0, T0 + timedelta(minutes=1)):
        run = caps.run(acme, at)
        assert (run.state, run.skip_reason) == (RunState.SKIPPED, "budget")
    assert (first.skipped_by_reason["budget"], second.skipped_by_reason["budget"]) == (1, 1)
    assert skipped_metrics(second) == {"RunsSkippedBudget": 1}
    assert first.jobs_capped == 1
    assert all(m["body"]["job_id"] != acme.id for m in caps.pipeline.messages())
    # And acme's job was not advanced (held where it was), while globex's ran on schedule
    assert caps.pipeline.dispatcher.jobs.get("acme", acme.id).next_due_at == before.next_due_at
    assert caps.run(globex, T0 + timedelta(minutes=1)).state is RunState.QUEUED


def test_a_run_already_running_when_the_cap_is_reached_is_left_to_finish(caps):
    # Given acme's 12:00 run running, then acme goes over its budget
    job = caps.pipeline.jobs.create("acme", EVERY_MINUTE, T0 - timedelta(seconds=30))
    caps.tick(job, T0 - timedelta(seconds=20))
    running = caps.pipeline.dispatcher.runs.transition(caps.run(job, T0), RunState.RUNNING, T0)
    assert running is not None
    _capped(caps)
    # When the next ticks come
    caps.tick(job, T0 + timedelta(minutes=1, seconds=1))
    caps.tick(job, T0 + timedelta(minutes=2, seconds=1))
    # Then the running run is still running (no cancel requested); the later ones are skipped
    run = caps.run(job, T0)
    assert run.state is RunState.RUNNING and not run.cancel_requested
    assert caps.run(job, T0 + timedelta(minutes=2)).skip_reason == "budget"


def test_raising_the_cap_resumes_under_run_once_reviving_the_budget_records(caps):
    # Given acme capped for five minutes (12:00 .. 12:04 recorded skipped, reason budget)
    spent = _capped(caps)
    job = caps.pipeline.jobs.create("acme", EVERY_MINUTE, T0 - timedelta(seconds=30))
    for minute in range(5):
        caps.tick(job, T0 + timedelta(minutes=minute, seconds=1))
    # When an administrator raises the budget and the next tick comes at 12:05:01
    caps.service.set("acme", spent * 10, T0 + timedelta(minutes=5))
    summary = caps.tick(job, T0 + timedelta(minutes=5, seconds=1))
    # Then under run_once (the default) the latest missed occurrence runs as a catch-up, 12:05 on
    # schedule, and the older ones are revived in place as skipped with reason misfire
    latest = caps.run(job, T0 + timedelta(minutes=4))
    assert (latest.state, latest.trigger) == (RunState.QUEUED, Trigger.CATCHUP)
    assert caps.run(job, T0 + timedelta(minutes=5)).state is RunState.QUEUED
    for minute in range(4):
        run = caps.run(job, T0 + timedelta(minutes=minute))
        assert (run.state, run.skip_reason) == (RunState.SKIPPED, "misfire")
    assert summary.runs_revived == 5
    assert summary.skipped_by_reason == Counter({"misfire": 4})


def test_under_run_all_the_missed_occurrences_all_run_after_the_cap_is_cleared(caps):
    _capped(caps)
    job = caps.pipeline.jobs.create(
        "acme", EVERY_MINUTE | {"misfire_policy": "run_all"}, T0 - timedelta(seconds=30)
    )
    for minute in range(3):
        caps.tick(job, T0 + timedelta(minutes=minute, seconds=1))
    # When the budget is cleared
    caps.service.clear("acme")
    caps.tick(job, T0 + timedelta(minutes=3, seconds=1))
    # Then each missed occurrence runs (catch-up), none is left skipped
    for minute in range(3):
        run = caps.run(job, T0 + timedelta(minutes=minute))
        assert (run.state, run.trigger) == (RunState.QUEUED, Trigger.CATCHUP)


def test_a_new_month_resumes_dispatch(caps):
    # Given acme capped on the last day of February, its state read at 23:59:31
    end = datetime(2026, 2, 28, 23, 58, 30, tzinfo=UTC)
    _capped(caps, day="2026-02-28")
    job = caps.pipeline.jobs.create("acme", EVERY_MINUTE | {"misfire_policy": "skip"}, end)
    caps.tick(job, end + timedelta(seconds=61))
    assert caps.run(job, datetime(2026, 2, 28, 23, 59, tzinfo=UTC)).skip_reason == "budget"
    # When the first tick of March comes 30 s later (within the TTL, but the cache is of February)
    caps.tick(job, datetime(2026, 3, 1, 0, 0, 1, tzinfo=UTC))
    # Then March's spend is 0: 00:00 runs on schedule, and 23:59 follows the policy (skip: misfire)
    assert caps.run(job, datetime(2026, 3, 1, tzinfo=UTC)).state is RunState.QUEUED
    assert caps.run(job, datetime(2026, 2, 28, 23, 59, tzinfo=UTC)).skip_reason == "misfire"


def _owners_told_by_webhook_at(caps, url: str, used: float):
    """acme's default notify is the webhook ``url``, its spend ``used`` of its budget; its job."""
    TenantSettingsStore(caps.dynamo, caps.settings.leases_table).put_notify("acme", {"webhook": url}, T0)
    spent = caps.spend("acme", "2026-03-02", 1000.0)
    caps.budgets.put("acme", spent / used, T0)
    return caps.pipeline.jobs.create("acme", EVERY_MINUTE, T0 - timedelta(seconds=30))


def test_at_80_percent_the_owners_are_notified_once_per_month(caps, hook):
    # Given acme's default notify is a webhook, and its spend is 90 % of its budget
    url, server = hook
    job = _owners_told_by_webhook_at(caps, url, 0.9)
    # When three ticks read its state (each after the TTL), the last one in a new gate (a new container)
    caps.tick(job, T0 + timedelta(seconds=1))
    caps.tick(job, T0 + timedelta(minutes=1, seconds=1))
    Caps(caps.pipeline).tick(job, T0 + timedelta(minutes=2, seconds=1))
    # Then one notification was sent, saying the month, budget and share used; runs were not held
    [body] = server.seen
    assert body["type"] == "budget_warning" and body["id"] == "budget:acme:2026-03"
    assert body["tenant"] == "acme" and body["percent_used"] == pytest.approx(90, abs=0.01)
    assert caps.run(job, T0 + timedelta(minutes=2)).state is RunState.QUEUED
    marker = caps.dynamo.get(caps.settings.runs_table, marker_key("acme", "2026-03"))
    assert marker["notified"]["state"] == "sent"


def test_under_80_percent_nobody_is_notified(caps, hook):
    url, server = hook
    job = _owners_told_by_webhook_at(caps, url, 0.7)
    caps.tick(job, T0 + timedelta(seconds=1))
    assert server.seen == []
    assert caps.dynamo.get(caps.settings.runs_table, marker_key("acme", "2026-03")) is None


def test_the_gate_reads_a_tenants_state_once_per_ttl(caps):
    # Given three jobs of acme, each dispatched at once when created
    reads = caps.gate.reads
    jobs = [caps.pipeline.jobs.create("acme", EVERY_MINUTE | {"name": f"j{i}"}, T0) for i in range(3)]
    # When a tick dispatches all three, twice within the TTL
    for _ in range(2):
        caps.pipeline.dispatcher.dispatch_jobs(
            [caps.pipeline.dispatcher.jobs.get("acme", j.id) for j in jobs], T0 + timedelta(seconds=1)
        )
    # Then acme's state was read once; a minute later, once more
    assert caps.gate.reads - reads == 1
    caps.gate.capped("acme", T0 + timedelta(seconds=1 + TTL))
    assert caps.gate.reads - reads == 2


def test_a_budget_set_through_the_service_applies_at_once_in_the_same_process(caps):
    # Given acme's state cached as "no budget"
    spent = caps.spend("acme", "2026-03-02", 1000.0)
    assert not caps.gate.capped("acme", T0)
    # When an administrator sets a budget below the spend (the API's service in the same process)
    caps.service.set("acme", spent / 2, T0)
    # Then the gate reads it again at once (its cache forgot the tenant), within the TTL
    assert caps.gate.capped("acme", T0)


def test_a_failed_read_dispatches_without_the_cap(caps):
    class Broken:
        def get(self, tenant):
            raise RuntimeError("table unreachable")

    caps.service.budgets = Broken()
    assert caps.gate.capped("acme", T0) is False
    assert caps.gate.status("acme", T0) is not None  # remembered as "no budget" for the TTL


def test_the_dispatcher_reads_no_usage_for_a_tenant_without_a_budget(caps):
    # Given acme has spent something but has no budget
    caps.spend("acme", "2026-03-02", 1000.0)
    days_read: list[str] = []
    usage = caps.service.usage
    caps.service.usage = type(
        "Spy", (), {"tenant_days": lambda _, t, a, b: days_read.append(t) or usage.tenant_days(t, a, b)}
    )()
    # When the gate reads its state, Then its usage items are not read (one GetItem of the budget)
    assert caps.gate.capped("acme", T0) is False
    assert days_read == []
    # And once it has a budget, they are
    caps.service.set("acme", 1000.0, T0)
    days_read.clear()
    assert caps.gate.capped("acme", T0) is False
    assert days_read == ["acme", "acme"]  # the days before today, then today


def test_the_dispatcher_reads_the_past_days_once_an_hour_and_today_every_minute(caps):
    # Given acme with a budget, spending on the 1st and on the 2nd of March
    first = caps.spend("acme", "2026-03-01", 1000.0)
    caps.budgets.put("acme", first * 10, T0)
    ranges: list[tuple[str, str]] = []
    usage = caps.service.usage

    class Spy:
        def tenant_days(self, tenant, a, b):
            ranges.append((a.isoformat(), b.isoformat()))
            return usage.tenant_days(tenant, a, b)

    caps.service.usage = Spy()
    # When the gate reads acme's state at 12:00, 12:01 and 13:00:01
    for at in (T0, T0 + timedelta(minutes=1), T0 + timedelta(hours=1, seconds=1)):
        caps.gate.capped("acme", at)
    today = caps.spend("acme", "2026-03-02", 500.0)  # what a worker adds meanwhile counts at once
    status = caps.gate.status("acme", T0 + timedelta(hours=1, minutes=1, seconds=2))
    # Then the 1st was read at 12:00 and again after an hour; the 2nd at every read
    past, now = ("2026-03-01", "2026-03-01"), ("2026-03-02", "2026-03-02")
    assert ranges == [past, now, now, past, now, now]
    assert status.spent_usd == pytest.approx(first + today)
