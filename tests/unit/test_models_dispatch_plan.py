"""The pure dispatch planner: what one tick decides for one job, from stored state and ``now``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.core.dispatch_plan import plan_job
from jobsched.core.models import Job, JobState, Run, RunState, Trigger, make_run_id

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def _job(schedule: str = "* * * * *", next_due: datetime | None = T0, **kw) -> Job:
    return Job(
        id="j1",
        tenant="acme",
        name="n",
        schedule=schedule,
        target={"handler": "echo"},
        created_at=T0 - timedelta(days=1),
        updated_at=T0 - timedelta(days=1),
        next_due_at=next_due,
        **kw,
    )


def _previous(state: RunState, due: datetime) -> Run:
    return Run(
        id=make_run_id("j1", due),
        job_id="j1",
        tenant="acme",
        state=state,
        scheduled_at=due,
        due_at=due,
        created_at=due,
    )


def test_allow_fires_what_is_due_and_what_falls_inside_the_horizon():
    plan = plan_job(_job(), T0 + timedelta(seconds=10), timedelta(seconds=120))
    assert [o.at for o in plan.fire] == [T0, T0 + MINUTE, T0 + 2 * MINUTE]
    assert plan.job.next_due_at == T0 + 3 * MINUTE and plan.job.last_fired_at == T0 + 2 * MINUTE


def test_fires_per_job_and_tick_are_capped_and_the_cursor_stops_after_the_last():
    plan = plan_job(_job("* * * * * *"), T0, timedelta(seconds=900), max_fires=500)
    assert len(plan.fire) == 500
    assert plan.job.next_due_at == T0 + timedelta(seconds=500)


def test_a_non_allow_job_is_held_while_its_previous_run_waits_for_its_due_instant():
    job = _job(overlap_policy="skip", next_due=T0 + MINUTE)
    plan = plan_job(
        job, T0 + timedelta(seconds=30), MINUTE, _previous(RunState.QUEUED, T0 + timedelta(seconds=45))
    )
    assert plan.hold and plan.fire == []


def test_a_non_allow_job_enqueues_at_most_one_run_ahead():
    job = _job(overlap_policy="skip", next_due=T0 + MINUTE)
    plan = plan_job(job, T0 + timedelta(seconds=10), timedelta(seconds=300), None)
    assert [o.at for o in plan.fire] == [T0 + MINUTE]
    assert plan.job.next_due_at == T0 + 2 * MINUTE


def test_a_one_off_job_completes_once_its_run_is_planned():
    job = _job("at(2026-03-02T12:00:05)", next_due=T0 + timedelta(seconds=5))
    plan = plan_job(job, T0, MINUTE)
    assert [o.at for o in plan.fire] == [T0 + timedelta(seconds=5)]
    assert plan.job.state is JobState.COMPLETED and plan.job.next_due_at is None


def test_a_resume_override_is_used_for_the_backlog_and_then_cleared():
    job = _job(misfire_policy="run_all", misfire_override="skip")
    plan = plan_job(job, T0 + 10 * MINUTE, timedelta(0))
    assert [o.at for o in plan.fire] == [T0 + 9 * MINUTE, T0 + 10 * MINUTE]  # within the 60 s grace
    assert len(plan.skipped) == 9 and plan.job.misfire_override is None


def test_catch_up_fires_are_marked_as_such():
    plan = plan_job(_job(misfire_policy="run_all"), T0 + 5 * MINUTE, timedelta(0))
    assert [o.trigger for o in plan.fire] == [Trigger.CATCHUP] * 4 + [Trigger.SCHEDULE] * 2


def test_a_huge_backlog_is_worked_off_over_several_ticks():
    # A per-second job one day behind: the planner reads a bounded slice per tick and moves the cursor
    job = _job("* * * * * *", next_due=T0 - timedelta(days=1))
    plan = plan_job(job, T0, timedelta(0))
    # (10 000 read, the newest kept undecided for run_once: the next tick may still fire it)
    assert plan.fire == [] and plan.summary is not None and plan.summary.count == 9_999
    assert plan.job.next_due_at == T0 - timedelta(days=1) + timedelta(seconds=9_999)


@pytest.mark.parametrize("state", [JobState.PAUSED, JobState.COMPLETED])
def test_inactive_jobs_are_held(state):
    assert plan_job(_job(state=state), T0, MINUTE).hold


def test_beyond_the_lookahead_only_a_batch_is_enqueued_ahead():
    # A per-minute job: the horizon (15 min) is cut at a batch of 10 runs ahead
    slow = plan_job(_job(), T0 - timedelta(seconds=1), timedelta(seconds=900), lookahead=MINUTE, batch=10)
    assert [o.at for o in slow.fire] == [T0 + m * MINUTE for m in range(10)]
    # A per-second job: everything inside the look-ahead, nothing beyond it
    fast = plan_job(_job("* * * * * *"), T0, timedelta(seconds=300), lookahead=MINUTE, batch=10)
    assert len(fast.fire) == 61 and fast.job.next_due_at == T0 + timedelta(seconds=61)


HORIZON = timedelta(seconds=900)  # the deployment's default enqueue horizon (SQS's cap)


def test_the_default_batch_plans_a_per_minute_job_fifteen_runs_per_advance():
    # Given a per-minute job whose cursor the tick at T0 - 60 s reaches (its look-ahead)
    tick = T0 - MINUTE
    # When it is planned with the default batch and the 900 s horizon
    plan = plan_job(_job(), tick, HORIZON, lookahead=MINUTE)
    # Then 15 runs are queued (T0 .. T0 + 14 min: the horizon's whole 900 s) and the cursor moves past them
    assert [o.at for o in plan.fire] == [T0 + m * MINUTE for m in range(15)]
    assert plan.job.next_due_at == T0 + 15 * MINUTE
    # And the next tick that reaches the cursor is 15 minutes later: one advance per 15 runs
    again = plan_job(plan.job, tick + 15 * MINUTE, HORIZON, lookahead=MINUTE)
    assert [o.at for o in again.fire] == [T0 + m * MINUTE for m in range(15, 30)]


@pytest.mark.parametrize(
    ("schedule", "tick", "runs", "span"),
    [
        # every 10 s, reached a look-ahead early: up to the batch of 15, 140 s of runs, not 900 s
        ("*/10 * * * * *", T0 - MINUTE, 15, timedelta(seconds=140)),
        # every second, reached at its cursor: the look-ahead's 61 instants (T0 .. T0 + 60 s), no more
        ("* * * * * *", T0, 61, timedelta(seconds=60)),
        # every 5 minutes: the horizon bounds it before the batch does (T0 .. T0 + 10 min)
        ("*/5 * * * *", T0 - MINUTE, 3, timedelta(minutes=10)),
    ],
)
def test_the_default_batch_never_queues_many_minutes_of_a_fast_job(schedule, tick, runs, span):
    # Given a job due at T0, planned by a tick with the 900 s horizon and the default batch
    plan = plan_job(_job(schedule), tick, HORIZON, lookahead=MINUTE)
    # Then it queues only what the look-ahead holds or the batch allows, whichever is more
    assert len(plan.fire) == runs
    assert plan.fire[-1].at - plan.fire[0].at == span
