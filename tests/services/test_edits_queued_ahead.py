"""An edit of an active job reaches its runs queued ahead (issue 12 §5, decision 0030), on the fakes.

The pipeline here dispatches with the deployment's 900 s enqueue horizon, so a per-minute job has
minutes of runs queued ahead when it is edited: a definition edit must make them execute with the new
definition (the old messages are stale at the claim), a timing edit must record the old schedule's
occurrences still ahead ``skipped``/``rescheduled`` and plan the new one from the edit — and a tick
that read the job before the edit must not put the old definition back (deterministic interleavings).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

import jobsched.targets.demo  # noqa: F401  (registers demo.*)
from jobsched.core.models import RunState
from jobsched.services.deliveries import Delivery
from tests.aws.conftest import T0, AwsEnv, Pipeline
from tests.aws.conftest_worker import Kit
from tests.aws.memory import build_pipeline, memory_aws_units  # noqa: F401  (on the in-memory fakes)

S = timedelta(seconds=1)
M = timedelta(minutes=1)
PER_MINUTE = {"name": "m", "schedule": "* * * * *", "target": {"handler": "demo.echo"}, "payload": {"v": 1}}


@pytest.fixture
def p(aws: AwsEnv) -> Pipeline:
    """The job service and dispatcher with a 900 s enqueue horizon (60 s look-ahead)."""
    pipeline = build_pipeline(AwsEnv(replace(aws.settings, enqueue_horizon_seconds=900), aws.clients))
    pipeline.jobs.catalog = None  # demo.echo runs in the worker below
    return pipeline


@pytest.fixture
def kit(aws, clock) -> Kit:
    return Kit(aws, clock)


def runs_by_instant(p: Pipeline, job_id: str) -> dict[datetime, object]:
    runs, _ = p.dispatcher.runs.list_for_job(job_id, limit=1000, newest_first=False)
    return {r.scheduled_at: r for r in runs}


def bodies(p: Pipeline, run_id: str) -> list[dict]:
    return [m["body"] for m in p.messages() if m["body"]["run_id"] == run_id]


def live_payloads(p: Pipeline, run) -> list[dict]:
    """Payloads of the messages of ``run`` that carry its current send token (the ones that can run it)."""
    return [b["payload"] for b in bodies(p, run.id) if b.get("token") == run.send_token]


def queued_after(p: Pipeline, job_id: str, at: datetime) -> list:
    return [r for t, r in runs_by_instant(p, job_id).items() if t > at and r.state is RunState.QUEUED]


# --- a definition edit -----------------------------------------------------------------------------


def test_a_payload_edit_makes_the_runs_queued_ahead_execute_with_the_new_payload(p, kit):
    # Given a per-minute job created at T0: its runs minutes ahead are queued, each with a message
    job = p.jobs.create("acme", PER_MINUTE, T0)
    ahead = queued_after(p, job.id, T0 + 30 * S)
    assert len(ahead) >= 9
    # When its payload is edited at T0+30 s
    p.jobs.update("acme", job.id, {"payload": {"v": 2}}, job.version, T0 + 30 * S)
    # Then every run queued ahead is still queued under its own id, and the only message that can run
    # it (its current send token) carries the new payload
    after = queued_after(p, job.id, T0 + 30 * S)
    assert [r.id for r in after] == [r.id for r in ahead]
    for run in after:
        assert live_payloads(p, run) == [{"v": 2}], run.id
    # And the message each was first sent with is dropped at the claim; the new one runs the edit
    run = after[3]
    old, new = bodies(p, run.id)
    worker = kit.worker()
    stale = worker.handle(Delivery.of(json.dumps(old)), run.due_at)
    assert (stale.status, stale.detail) == ("stale", {"superseded": True})
    assert worker.handle(Delivery.of(json.dumps(new)), run.due_at).status == "succeeded"
    assert kit.runs.get(run.id).output == {"v": 2}


def test_pinning_a_version_reaches_the_runs_queued_ahead(p):
    # Given a per-minute job of demo.echo, unpinned: its runs queued ahead name the handler, unbound
    job = p.jobs.create("acme", PER_MINUTE, T0)
    ahead = queued_after(p, job.id, T0 + 30 * S)
    assert {(r.handler, r.handler_version) for r in ahead} == {("demo.echo", None)}
    # When it is edited to pin version 1 (decision 0048)
    pinned = {"handler": "demo.echo", "version": 1}
    p.jobs.update("acme", job.id, {"target": pinned}, job.version, T0 + 30 * S)
    # Then each run queued ahead records the pinned version, and its live message pins it
    after = queued_after(p, job.id, T0 + 30 * S)
    assert {(r.handler, r.handler_version) for r in after} == {("demo.echo", 1)}
    for run in after:
        assert [b["target"] for b in bodies(p, run.id) if b.get("token") == run.send_token] == [pinned]


def test_an_edit_of_priority_and_jitter_moves_the_runs_queued_ahead(p):
    # Given a per-minute job with runs queued ahead on the default queue, due on the minute
    job = p.jobs.create("acme", PER_MINUTE, T0)
    # When it is edited to high priority and a 30 s jitter
    p.jobs.update("acme", job.id, {"priority": "high", "jitter_seconds": 30}, job.version, T0 + 10 * S)
    # Then the runs queued ahead are high-priority runs due within 30 s after their instant, each with a
    # live message on the high queue
    after = queued_after(p, job.id, T0 + 10 * S)
    assert after and {r.priority for r in after} == {"high"}
    assert all(r.scheduled_at <= r.due_at <= r.scheduled_at + 30 * S for r in after)
    assert any(r.due_at != r.scheduled_at for r in after)
    high = {m["body"]["run_id"]: m["body"]["token"] for m in p.messages("high")}
    assert all(high.get(r.id) == r.send_token for r in after)


def test_a_payload_edit_costs_one_write_per_run_queued_ahead_and_a_send_per_ten(p):
    # Given a per-minute job created at T0: the run due at once and 15 queued ahead (T0+1 .. T0+15 min)
    job = p.jobs.create("acme", PER_MINUTE, T0)
    ahead = queued_after(p, job.id, T0 + 30 * S)
    assert len(ahead) == 15
    p.meter.reset()
    # When its payload is edited at T0+30 s
    p.jobs.update("acme", job.id, {"payload": {"v": 2}}, job.version, T0 + 30 * S)
    # Then the runs cost one conditional UpdateItem each (1 WRU: a cron run's item is under 1 KB) and
    # their messages two SendMessageBatch requests; the job itself one PutItem
    assert p.meter.requests["dynamodb.UpdateItem"] == 15 == p.meter.wcu["UpdateItem"]
    assert p.meter.requests["sqs.SendMessageBatch"] == 2
    assert p.meter.requests["dynamodb.PutItem"] == 1


def test_an_edit_that_changes_nothing_runs_carry_leaves_them_alone(p):
    # Given a per-minute job with runs queued ahead
    job = p.jobs.create("acme", PER_MINUTE, T0)
    tokens = {r.id: r.send_token for r in queued_after(p, job.id, T0)}
    p.meter.reset()
    # When only its description and name are edited
    p.jobs.update("acme", job.id, {"description": "nightly", "name": "m2"}, job.version, T0 + 10 * S)
    # Then no run is rewritten and no message sent
    assert {r.id: r.send_token for r in queued_after(p, job.id, T0)} == tokens
    assert p.meter.requests.get("sqs.SendMessageBatch", 0) == 0
    assert p.meter.requests.get("dynamodb.UpdateItem", 0) == 0


# --- a timing edit ---------------------------------------------------------------------------------


def test_a_schedule_edit_reschedules_the_old_runs_ahead_and_plans_the_new_schedule_from_the_edit(p):
    # Given a per-minute job with runs queued ahead
    job = p.jobs.create("acme", PER_MINUTE, T0)
    before = runs_by_instant(p, job.id)
    old_ahead = [t for t, r in before.items() if t > T0 + 10 * S]
    # When its schedule becomes second 30 of every minute at T0+10 s
    edit = T0 + 10 * S
    updated = p.jobs.update("acme", job.id, {"schedule": "30 * * * * *"}, job.version, edit)
    runs = runs_by_instant(p, job.id)
    # Then the old schedule's occurrences still ahead are skipped, reason rescheduled (final)
    assert {(str(runs[t].state), runs[t].skip_reason) for t in old_ahead} == {("skipped", "rescheduled")}
    # And the new schedule runs from the edit: its first occurrence is the next one after it, queued
    assert runs[T0 + 30 * S].state is RunState.QUEUED and runs[T0 + 30 * S].trigger == "schedule"
    assert updated.version == job.version + 1
    # And the run due at T0 (before the edit) is left as it was
    assert runs[T0].state is RunState.QUEUED and runs[T0].send_token == before[T0].send_token


def test_a_schedule_edit_keeps_the_runs_at_instants_both_schedules_have(p):
    # Given a per-minute job with runs queued ahead
    job = p.jobs.create("acme", PER_MINUTE, T0)
    # When it becomes every two minutes at T0+10 s
    p.jobs.update("acme", job.id, {"schedule": "*/2 * * * *"}, job.version, T0 + 10 * S)
    runs = runs_by_instant(p, job.id)
    ahead = sorted(t for t in runs if t > T0 + 10 * S)
    # Then the odd minutes are rescheduled and the even ones are one queued run each, with a live message
    odd = [t for t in ahead if t.minute % 2]
    even = [t for t in ahead if not t.minute % 2]
    assert odd and {runs[t].skip_reason for t in odd} == {"rescheduled"}
    assert even and {runs[t].state for t in even} == {RunState.QUEUED}
    for t in even:
        assert live_payloads(p, runs[t]), t


# --- a tick that read the job before the edit (deterministic interleavings) -----------------------


def test_a_tick_that_read_the_job_before_a_payload_edit_does_not_run_the_old_payload(p):
    # Given a per-minute job whose runs are queued up to its cursor, read by a tick before the edit
    job = p.jobs.create("acme", PER_MINUTE, T0)
    cursor = p.jobs.get("acme", job.id).next_due_at
    stale = p.jobs.get("acme", job.id)
    # And the payload is edited 90 s before the cursor is due (no dispatch of its own: nothing is due)
    p.jobs.update("acme", job.id, {"payload": {"v": 2}}, job.version, cursor - 90 * S)
    # When the tick that read the job before the edit dispatches it 30 s later
    summary = p.dispatcher.dispatch_jobs([stale], cursor - 60 * S)
    # Then its advance is refused, and every run it queued from the cursor on can only run with the
    # edited payload
    assert summary.jobs_stale == 1 and summary.runs_created >= 1
    created = [r for t, r in runs_by_instant(p, job.id).items() if t >= cursor]
    assert len(created) == summary.runs_created
    for run in created:
        assert live_payloads(p, run) == [{"v": 2}], run.id
    # And it did so by refreshing them in place under the edited job version
    assert summary.runs_refreshed == summary.runs_created
    assert {run.job_version for run in created} == {job.version + 1}


def test_a_tick_that_read_the_job_before_the_edit_sends_nothing_for_runs_the_edit_queued(p):
    # Given a per-minute job read by a tick, then edited when its cursor is due, so the edit's own
    # dispatch queues the next runs with the new payload
    job = p.jobs.create("acme", PER_MINUTE, T0)
    cursor = p.jobs.get("acme", job.id).next_due_at
    stale = p.jobs.get("acme", job.id)
    p.jobs.update("acme", job.id, {"payload": {"v": 2}}, job.version, cursor - 60 * S)
    queued = [r for t, r in runs_by_instant(p, job.id).items() if t >= cursor]
    assert queued
    sent_before = len(p.messages())
    # When the stale tick dispatches the job as it read it, at the same instant
    summary = p.dispatcher.dispatch_jobs([stale], cursor - 60 * S)
    # Then it reuses those runs, sends no message with the old payload and rewrites none of them
    assert summary.runs_created == 0 and summary.messages_sent == 0 and summary.jobs_stale == 1
    assert len(p.messages()) == sent_before
    again = {r.id: r.send_token for t, r in runs_by_instant(p, job.id).items() if t >= cursor}
    assert again == {r.id: r.send_token for r in queued}


def test_a_tick_that_read_the_job_before_a_schedule_edit_leaves_no_old_schedule_run_queued(p):
    # Given a per-minute job read by a tick, then rescheduled to second 30 of every minute 90 s before
    # its cursor is due
    job = p.jobs.create("acme", PER_MINUTE, T0)
    cursor = p.jobs.get("acme", job.id).next_due_at
    stale = p.jobs.get("acme", job.id)
    edit = cursor - 90 * S
    p.jobs.update("acme", job.id, {"schedule": "30 * * * * *"}, job.version, edit)
    # When the stale tick dispatches the old schedule from the old cursor
    summary = p.dispatcher.dispatch_jobs([stale], cursor - 60 * S)
    # Then each run it created at an instant of the old schedule is skipped, reason rescheduled
    assert summary.runs_created >= 1 and summary.jobs_stale == 1
    runs = runs_by_instant(p, job.id)
    on_the_minute = [r for t, r in runs.items() if t > edit and t.second == 0]
    assert {(str(r.state), r.skip_reason) for r in on_the_minute} == {("skipped", "rescheduled")}
    # And the new schedule's runs after the edit are queued, one per occurrence
    new = [r for t, r in runs.items() if t > edit and t.second == 30]
    assert new and {r.state for r in new} == {RunState.QUEUED}
