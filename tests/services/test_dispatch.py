"""Dispatcher guarantees (on the in-memory fakes): one run per occurrence, crash safety, fencing,
policies, DST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.aws.jobs_store import JobsStore
from jobsched.aws.queues import RunQueues
from jobsched.core.errors import LeaseLostError
from jobsched.core.models import RunState, Trigger, make_run_id
from jobsched.services.dispatcher import Dispatcher, DispatcherConfig
from tests.aws.conftest import T0, Pipeline
from tests.aws.memory import build_pipeline, memory_aws, memory_pipeline  # noqa: F401  (on the in-memory fakes)

EVERY_MINUTE = {"name": "tick", "schedule": "* * * * *", "target": {"handler": "echo"}}


def _runs(p: Pipeline, job_id: str) -> dict[str, object]:
    runs, _ = p.dispatcher.runs.list_for_job(job_id, limit=1000, newest_first=False)
    return {r.id: r for r in runs}


def _tick(p: Pipeline, job, now: datetime):
    """One tick of the job's shard at ``now``."""
    return p.tick(job, now)


def _clone(p: Pipeline, owner: str, *, clock=None, jobs=None, queues=None) -> Dispatcher:
    """A second dispatcher over the pipeline's stores; with a ``clock`` it reads it (a tick's)."""
    d = p.dispatcher
    config = DispatcherConfig(
        lookahead=d.lookahead,
        owner=owner,
        enqueue_horizon=d.horizon,
        lease_ttl=d.config.lease_ttl,
        shards=d.shards,
        reads_clock=clock is not None,
    )
    return Dispatcher(
        jobs or d.jobs, d.runs, d.leases, queues or d.queues, config=config, clock=clock or d.clock
    )


def test_create_dispatches_a_one_off_job_due_seconds_ahead_at_once(pipeline):
    # Given a one-off job 5 s ahead / When created / Then its run is queued with a 5 s delay, job completed
    job = pipeline.jobs.create(
        "acme", {"name": "soon", "schedule": "at(2026-03-02T12:00:05)", "target": {"handler": "echo"}}, T0
    )
    runs = _runs(pipeline, job.id)
    assert list(runs) == [make_run_id(job.id, T0 + timedelta(seconds=5))]
    [message] = pipeline.messages("default")
    assert message["delay"] == 5 and message["group"] == "acme"
    assert message["body"]["attempt"] == 1 and message["body"]["target"] == {"handler": "echo"}
    assert job.state == "completed" and job.next_due_at is None


def test_double_tick_creates_one_run_per_occurrence(pipeline):
    # Guarantee 1 (one run per occurrence) under a double tick at the same instant.
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    now = T0 + timedelta(minutes=3)
    first = _tick(pipeline, job, now)
    second = _tick(pipeline, job, now)
    runs = _runs(pipeline, job.id)
    expected = {make_run_id(job.id, T0 + timedelta(minutes=m)) for m in range(0, 5)}
    assert set(runs) == expected
    assert first.runs_created > 0 and second.runs_created == 0


def test_two_dispatchers_with_the_same_snapshot_create_each_run_once(pipeline):
    # Guarantee 1 under two concurrent dispatchers: both read the job before either advances it.
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    now = T0 + timedelta(minutes=2)
    snapshot = pipeline.dispatcher.jobs.get("acme", job.id)
    a, b = _clone(pipeline, "a"), _clone(pipeline, "b")
    first = a.dispatch_jobs([snapshot], now)
    second = b.dispatch_jobs([snapshot], now)
    assert first.runs_created == 2 and first.jobs_advanced == 1
    assert second.runs_created == 0 and second.runs_reused == 2 and second.jobs_stale == 1
    assert len(_runs(pipeline, job.id)) == 4  # 12:00, 12:01 (at create) + 12:02, 12:03


def test_second_dispatcher_cannot_tick_a_shard_whose_lease_is_held(pipeline):
    from jobsched.aws.leases import LeaseHeldError

    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    pipeline.dispatcher.leases.acquire(f"shard#{pipeline.dispatcher.shard_of(job.id)}", "someone-else", T0)
    with pytest.raises(LeaseHeldError):
        _tick(pipeline, job, T0 + timedelta(seconds=30))


class _CrashingQueues(RunQueues):
    def send(self, outgoing):
        raise RuntimeError("crash before send")


class _CrashingJobs(JobsStore):
    def advance(self, read, updated, fence, fence_lease=None):
        raise RuntimeError("crash before advance")


def test_crash_between_run_put_and_send_is_completed_by_next_tick(pipeline):
    # Given a tick that created its runs and died before sending
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    now = T0 + timedelta(minutes=5)
    crashing = _clone(pipeline, "a", queues=_CrashingQueues(None, {}))
    with pytest.raises(RuntimeError):
        crashing.dispatch_shard(crashing.shard_of(job.id), now)
    before = len(pipeline.messages())
    # When the next tick runs (a dead process's lease would have expired by then)
    summary = _tick(pipeline, job, now + timedelta(seconds=61))
    # Then it reuses the runs, sends them and advances the job; no occurrence has two runs
    assert summary.runs_reused >= 1 and summary.jobs_advanced == 1
    sent = [m["body"]["run_id"] for m in pipeline.messages()[before:]]
    assert make_run_id(job.id, now) in sent
    assert len(sent) == len(set(sent))
    assert pipeline.dispatcher.jobs.get("acme", job.id).next_due_at > now


def test_crash_between_send_and_advance_leaves_duplicates_only_in_the_queue(pipeline):
    # Given a tick that sent its messages and died before advancing the job
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    now = T0 + timedelta(minutes=5)
    crashing = _clone(
        pipeline, "a", jobs=_CrashingJobs(pipeline.dispatcher.jobs.dynamo, pipeline.dispatcher.jobs.table)
    )
    with pytest.raises(RuntimeError):
        crashing.dispatch_shard(crashing.shard_of(job.id), now)
    runs_before = set(_runs(pipeline, job.id))
    # When the next tick runs
    summary = _tick(pipeline, job, now + timedelta(seconds=90))
    # Then no run was created twice for an occurrence; the re-sent messages carry the same run id and
    # attempt (the worker's conditional claim lets only one delivery execute), and the job moved on
    runs_after = _runs(pipeline, job.id)
    assert runs_before <= set(runs_after)
    assert summary.runs_reused >= 1 and summary.jobs_advanced == 1
    bodies = [(m["body"]["run_id"], m["body"]["attempt"]) for m in pipeline.messages()]
    assert set(bodies) <= {(rid, 1) for rid in runs_after}


def test_stale_dispatcher_with_an_old_fencing_token_cannot_advance(pipeline):
    # Guarantee 3 (fenced ownership): A's lease expires, B takes the shard with a higher token.
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    a, b = _clone(pipeline, "a"), _clone(pipeline, "b")
    lease_a = a.leases.acquire(
        f"shard#{pipeline.dispatcher.shard_of(job.id)}", "a", T0 + timedelta(minutes=1)
    )
    snapshot = a.jobs.get("acme", job.id)
    b_summary = b.dispatch_shard(b.shard_of(job.id), T0 + timedelta(minutes=3))  # after A's lease expired
    assert b_summary.fences[b.shard_of(job.id)] == lease_a.token + 1
    after_b = a.jobs.get("acme", job.id)
    # When A, unaware, dispatches with its old lease / Then it is refused before advancing anything
    with pytest.raises(LeaseLostError):
        a.dispatch_jobs([snapshot], T0 + timedelta(minutes=1), lease=lease_a)
    # And a direct advance under the old token is refused by the job's fence
    with pytest.raises(LeaseLostError):
        a.jobs.advance(after_b, after_b, lease_a.token)
    with pytest.raises(LeaseLostError):
        a.jobs.advance(after_b, after_b, lease_a.token, fence_lease=lease_a.key)
    assert a.jobs.get("acme", job.id) == after_b


@pytest.mark.parametrize(
    ("policy", "fired", "skipped"),
    [
        # created at 12:00 (12:00, 12:01 dispatched at once); tick at 12:10:30, grace 60 s:
        # late = 12:02..12:09, on time = 12:10, ahead (look-ahead 60 s) = 12:11
        ("run_once", [9, 10, 11], list(range(2, 9))),
        ("run_all", list(range(2, 12)), []),
        ("skip", [10, 11], list(range(2, 10))),
    ],
)
def test_misfire_policy_on_catch_up(pipeline, policy, fired, skipped):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"misfire_policy": policy}, T0)
    _tick(pipeline, job, T0 + timedelta(minutes=10, seconds=30))
    runs = _runs(pipeline, job.id)
    by_minute = {int((r.scheduled_at - T0).total_seconds() // 60): r for r in runs.values()}
    assert sorted(m for m, r in by_minute.items() if r.state is RunState.QUEUED and m >= 2) == fired
    assert sorted(m for m, r in by_minute.items() if r.state is RunState.SKIPPED) == skipped
    assert all(by_minute[m].skip_reason == "misfire" for m in skipped)
    if policy == "run_once":
        assert by_minute[9].trigger is Trigger.CATCHUP and by_minute[10].trigger is Trigger.SCHEDULE


def test_overlap_skip_records_the_occurrence_when_the_previous_run_is_still_running(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"overlap_policy": "skip"}, T0)
    # Given the 12:00 run is running (claimed by a worker) and nothing else was enqueued ahead
    first = pipeline.dispatcher.runs.get(make_run_id(job.id, T0))
    pipeline.dispatcher.runs.transition(first, RunState.RUNNING, T0)
    assert set(_runs(pipeline, job.id)) == {first.id}
    # When the 12:01 occurrence comes due
    _tick(pipeline, job, T0 + timedelta(minutes=1, seconds=1))
    # Then it is recorded skipped with reason overlap, not run
    second = pipeline.dispatcher.runs.get(make_run_id(job.id, T0 + timedelta(minutes=1)))
    assert second.state is RunState.SKIPPED and second.skip_reason == "overlap"


def test_overlap_skip_fires_again_once_the_previous_run_finished(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"overlap_policy": "skip"}, T0)
    first = pipeline.dispatcher.runs.get(make_run_id(job.id, T0))
    running = pipeline.dispatcher.runs.transition(first, RunState.RUNNING, T0)
    pipeline.dispatcher.runs.transition(running, RunState.SUCCEEDED, T0 + timedelta(seconds=20))
    _tick(pipeline, job, T0 + timedelta(seconds=30))
    second = pipeline.dispatcher.runs.get(make_run_id(job.id, T0 + timedelta(minutes=1)))
    assert second.state is RunState.QUEUED


def test_pause_withdraws_runs_queued_ahead_of_their_due_instant(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)  # 12:00 (due now) and 12:01 (ahead) queued
    result = pipeline.jobs.pause("acme", job.id, T0 + timedelta(seconds=10), note="db maintenance")
    ahead = pipeline.dispatcher.runs.get(make_run_id(job.id, T0 + timedelta(minutes=1)))
    current = pipeline.dispatcher.runs.get(make_run_id(job.id, T0))
    assert result.withdrawn == [ahead.id]
    assert ahead.state is RunState.SKIPPED and ahead.skip_reason == "paused"
    assert current.state is RunState.QUEUED
    assert result.job.paused_note == "db maintenance"


def test_paused_job_is_not_dispatched(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    pipeline.jobs.pause("acme", job.id, T0 + timedelta(seconds=10))
    summary = _tick(pipeline, job, T0 + timedelta(minutes=5))
    assert summary.jobs_seen == 0 and len(_runs(pipeline, job.id)) == 2


def test_resume_with_override_applies_it_to_the_paused_backlog_only(pipeline):
    # Given a run_all job paused for ten minutes
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"misfire_policy": "run_all"}, T0)
    pipeline.jobs.pause("acme", job.id, T0 + timedelta(seconds=10))
    # When resumed with misfire_policy=skip
    resumed = pipeline.jobs.resume(
        "acme", job.id, T0 + timedelta(minutes=10, seconds=30), misfire_policy="skip"
    )
    # Then the missed occurrences are skipped, the on-time one and the one ahead fire, override cleared
    runs = _runs(pipeline, job.id)
    by_minute = {int((r.scheduled_at - T0).total_seconds() // 60): r for r in runs.values()}
    assert [m for m in range(2, 10) if by_minute[m].skip_reason == "misfire"] == list(range(2, 10))
    assert by_minute[10].state is RunState.QUEUED and by_minute[11].state is RunState.QUEUED
    assert resumed.misfire_override is None and resumed.misfire_policy == "run_all"


def test_dst_gap_shift_end_to_end_fires_once_after_the_gap(aws):
    # 02:30 Europe/Berlin does not exist on 2026-03-29 (02:00 CET -> 03:00 CEST = 01:00Z)
    p = build_pipeline(aws)
    created = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    job = p.jobs.create(
        "acme",
        {
            "name": "nightly",
            "schedule": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "target": {"handler": "echo"},
        },
        created,
    )
    assert job.next_due_at == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    p.tick(job, datetime(2026, 3, 29, 0, 59, 30, tzinfo=UTC))
    [message] = p.messages()
    assert message["body"]["scheduled_at"] == "2026-03-29T01:00:00.000Z" and message["delay"] == 30
    after = p.dispatcher.jobs.get("acme", job.id)
    assert after.next_due_at == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)  # 02:30 CEST


def test_dst_gap_skip_end_to_end_records_a_skipped_run(aws):
    p = build_pipeline(aws)
    created = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    job = p.jobs.create(
        "acme",
        {
            "name": "nightly",
            "schedule": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "dst_gap": "skip",
            "target": {"handler": "echo"},
        },
        created,
    )
    # The cursor stops at the skipped occurrence, so the tick that reaches it records it
    assert job.next_due_at == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    p.tick(job, datetime(2026, 3, 29, 0, 59, 30, tzinfo=UTC))
    skipped = [r for r in _runs(p, job.id).values() if r.state is RunState.SKIPPED]
    assert [(r.scheduled_at, r.skip_reason) for r in skipped] == [
        (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), "dst_gap")
    ]
    assert p.messages() == []
    p.tick(job, datetime(2026, 3, 30, 0, 29, 30, tzinfo=UTC))
    assert [m["body"]["scheduled_at"] for m in p.messages()] == ["2026-03-30T00:30:00.000Z"]


def test_jitter_delays_the_message_deterministically(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"jitter_seconds": 30}, T0)
    from jobsched.core.policies import jitter_offset

    run_id = make_run_id(job.id, T0 + timedelta(minutes=1))
    run = pipeline.dispatcher.runs.get(run_id)
    assert run.due_at == T0 + timedelta(minutes=1) + jitter_offset(run_id, 30)
    assert run.due_at - run.scheduled_at <= timedelta(seconds=30)


def test_messages_go_to_the_jobs_priority_queue(pipeline):
    pipeline.jobs.create("acme", EVERY_MINUTE | {"priority": "high"}, T0)
    assert len(pipeline.messages("high")) == 2 and pipeline.messages("default") == []


def test_a_tick_that_overran_its_lease_stops_before_advancing(pipeline):
    # Given a dispatcher whose sends take longer than its 60 s lease
    from jobsched.core.clock import FakeClock

    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0)
    clock = FakeClock(T0 + timedelta(minutes=2))

    class SlowQueues(RunQueues):
        def send(self, outgoing):
            clock.advance(seconds=61)
            return super().send(outgoing)

    slow = _clone(
        pipeline,
        "slow",
        queues=SlowQueues(pipeline.env.clients.sqs, pipeline.env.settings.queue_urls),
        clock=clock,
    )
    before = pipeline.dispatcher.jobs.get("acme", job.id)
    # When it ticks / Then the lease re-check refuses, and the job is left for the next tick
    with pytest.raises(LeaseLostError, match="expired"):
        slow.dispatch_shard(slow.shard_of(job.id), clock.now())
    assert pipeline.dispatcher.jobs.get("acme", job.id) == before
