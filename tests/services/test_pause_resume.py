"""Pause and resume (on the in-memory fakes): the schedule goes on after a resume, withdrawn occurrences are
revived (never created twice), and the misfire policy decides what was missed while paused — whether
or not a run had been queued ahead for it (issue 10, items 1 and 2).

The pipeline dispatches with a 60 s look-ahead, so a per-second job created at T0 has its runs up to
T0+60 queued ahead when it is paused a few seconds later.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from jobsched.core.models import RunState, Trigger, make_run_id
from tests.aws.conftest import T0, Pipeline
from tests.aws.memory import memory_aws, memory_pipeline  # noqa: F401  (this file runs on the in-memory fakes)

S = timedelta(seconds=1)
EVERY_SECOND = {"name": "s", "schedule": "* * * * * *", "target": {"handler": "echo"}}
EVERY_TWO = {"name": "s2", "schedule": "*/2 * * * * *", "target": {"handler": "echo"}}


def _runs(p: Pipeline, job_id: str) -> dict[datetime, object]:
    runs: list = []
    start = None
    while True:
        page, start = p.dispatcher.runs.list_for_job(
            job_id, limit=1000, newest_first=False, start_after=start
        )
        runs += page
        if start is None:
            break
    return {r.scheduled_at: r for r in runs}


def _shape(run) -> tuple[str, str, str | None]:
    return (str(run.state), str(run.trigger), run.skip_reason)


QUEUED = ("queued", "schedule", None)
CATCHUP = ("queued", "catchup", None)
MISFIRE = ("skipped", "schedule", "misfire")


# --- item 1: the schedule goes on after a resume ---------------------------------------------------


def test_issue_repro_after_a_short_pause_the_schedule_goes_on_at_its_next_occurrence(pipeline):
    # Given a */2-second job whose runs up to T0+60 s are queued ahead, paused at T0+3 s
    job = pipeline.jobs.create("acme", EVERY_TWO, T0)
    withdrawn = pipeline.jobs.pause("acme", job.id, T0 + 3 * S).withdrawn
    assert len(withdrawn) == 29  # T0+4 .. T0+60
    # When it is resumed 6 s later with misfire_policy skip
    resumed = pipeline.jobs.resume("acme", job.id, T0 + 9 * S, misfire_policy="skip")
    # Then every occurrence from the resume on is queued again, on schedule
    runs = _runs(pipeline, job.id)
    after = [runs[T0 + k * S] for k in range(10, 61, 2)]
    assert [_shape(r) for r in after] == [QUEUED] * len(after)
    # And the ones that fell while paused were late by less than the grace (60 s): on time, they fire
    assert [_shape(runs[T0 + k * S]) for k in (4, 6, 8)] == [QUEUED] * 3
    # And no occurrence after the resume is recorded skipped (paused)
    assert not [r for at, r in runs.items() if r.skip_reason == "paused" and at > T0 + 9 * S]
    assert resumed.next_due_at > T0 + 60 * S


def test_withdrawn_runs_are_revived_not_created_twice(pipeline):
    # Given a per-second job paused at T0+0.5 s (its runs T0+1 .. T0+60 s withdrawn)
    job = pipeline.jobs.create("acme", EVERY_SECOND, T0)
    pipeline.jobs.pause("acme", job.id, T0 + S / 2)
    before = _runs(pipeline, job.id)
    assert {r.skip_reason for at, r in before.items() if at > T0} == {"paused"}
    # When resumed 2 s later and ticked at the resume
    pipeline.jobs.resume("acme", job.id, T0 + 2.5 * S)
    summary = pipeline.tick(job, T0 + 2.5 * S)
    # Then each withdrawn occurrence is queued again under its own id, with one message sent for it
    after = _runs(pipeline, job.id)
    assert set(before) <= set(after)  # no new item for them (the new ones are after T0+60 s)
    assert all(after[T0 + k * S].state is RunState.QUEUED for k in range(1, 61))
    assert summary.runs_created == 0  # the tick found them revived by the resume's dispatch
    sent = [m["body"]["run_id"] for m in pipeline.messages()]
    revived = [make_run_id(job.id, T0 + k * S) for k in range(1, 61)]
    assert all(sent.count(run_id) >= 1 for run_id in revived)


def test_a_tick_after_the_resume_keeps_the_schedule_going(pipeline):
    # Given a */2-second job paused at T0+3 s and resumed at T0+9 s
    job = pipeline.jobs.create("acme", EVERY_TWO, T0)
    pipeline.jobs.pause("acme", job.id, T0 + 3 * S)
    pipeline.jobs.resume("acme", job.id, T0 + 9 * S)
    # When the shard ticks a minute later
    pipeline.tick(job, T0 + 70 * S)
    # Then the occurrences from T0 to T0+130 s are one queued run each, none skipped
    runs = _runs(pipeline, job.id)
    assert [_shape(runs[T0 + k * S]) for k in range(0, 131, 2)] == [QUEUED] * 66


# --- item 2: the misfire policy on resume, whether or not runs were queued ahead -------------------


def _paused_for_six_seconds(pipeline, policy: str, *, resume_policy: str | None = None, **extra):
    """A per-second job (grace 1 s) paused at T0+0.5 s — its runs T0+1 .. T0+60 s queued ahead and
    withdrawn — and resumed at T0+6.5 s. Returns its runs by scheduled instant."""
    spec = EVERY_SECOND | {"misfire_policy": policy, "misfire_grace_seconds": 1} | extra
    job = pipeline.jobs.create("acme", spec, T0)
    assert len(pipeline.jobs.pause("acme", job.id, T0 + S / 2).withdrawn) == 60
    pipeline.jobs.resume("acme", job.id, T0 + 6.5 * S, misfire_policy=resume_policy)
    return _runs(pipeline, job.id)


@pytest.mark.parametrize(
    ("policy", "resume_policy", "missed"),
    [
        # T0+1 .. T0+5 s are late by more than the 1 s grace at the resume (T0+6.5 s)
        ("run_all", None, [CATCHUP] * 5),
        ("run_once", None, [MISFIRE] * 4 + [CATCHUP]),
        ("skip", None, [MISFIRE] * 5),
        ("run_once", "run_all", [CATCHUP] * 5),
        ("run_all", "skip", [MISFIRE] * 5),
    ],
)
def test_issue_repro_the_misfire_policy_decides_what_was_withdrawn_at_the_pause(
    pipeline, policy, resume_policy, missed
):
    runs = _paused_for_six_seconds(pipeline, policy, resume_policy=resume_policy)
    # Then the missed occurrences follow the policy, oldest first, as if nothing had been queued ahead
    assert [_shape(runs[T0 + k * S]) for k in range(1, 6)] == missed
    # And T0+6 s (0.5 s late: on time) and everything after the resume are queued on schedule
    assert [_shape(runs[T0 + k * S]) for k in range(6, 61)] == [QUEUED] * 55
    # And T0 (due before the pause) is left as it was
    assert _shape(runs[T0]) == QUEUED


def test_run_all_on_resume_is_capped_by_max_catchup(pipeline):
    runs = _paused_for_six_seconds(pipeline, "run_all", max_catchup=2)
    # Then the two most recent missed occurrences fire, the older ones are recorded skipped
    assert [_shape(runs[T0 + k * S]) for k in range(1, 6)] == [MISFIRE] * 3 + [CATCHUP] * 2


@pytest.mark.parametrize("policy", ["run_all", "run_once", "skip"])
def test_the_outcome_is_the_same_when_nothing_was_queued_ahead(pipeline, policy):
    # Given the same job paused at T0+0.5 s, but dispatched with no look-ahead: nothing queued ahead
    ahead_config = pipeline.dispatcher.config
    pipeline.dispatcher.config = replace(ahead_config, lookahead=timedelta(0), enqueue_horizon=timedelta(0))
    spec = EVERY_SECOND | {"misfire_policy": policy, "misfire_grace_seconds": 1}
    job = pipeline.jobs.create("acme", spec, T0)
    assert pipeline.jobs.pause("acme", job.id, T0 + S / 2).withdrawn == []
    pipeline.jobs.resume("acme", job.id, T0 + 6.5 * S)
    alone = _runs(pipeline, job.id)
    # Then the missed occurrences are decided exactly as for a job that had them queued ahead
    pipeline.dispatcher.config = replace(
        ahead_config, lookahead=timedelta(seconds=60), enqueue_horizon=timedelta(seconds=60)
    )
    ahead = _paused_for_six_seconds(pipeline, policy)
    assert [_shape(alone[T0 + k * S]) for k in range(1, 7)] == [
        _shape(ahead[T0 + k * S]) for k in range(1, 7)
    ]


def test_a_long_pause_summarises_the_withdrawn_occurrences_with_the_others(pipeline):
    # Given a per-second skip job paused at T0+1 s (T0+2 .. T0+60 s withdrawn) and resumed an hour later
    job = pipeline.jobs.create("acme", EVERY_SECOND | {"misfire_policy": "skip"}, T0)
    pipeline.jobs.pause("acme", job.id, T0 + S)
    pipeline.jobs.resume("acme", job.id, T0 + timedelta(hours=1))
    runs = _runs(pipeline, job.id)
    # Then one summary record, at the first withdrawn occurrence, counts every missed one (T0+2 .. 3539 s)
    summary = runs[T0 + 2 * S]
    assert (summary.skip_reason, summary.skipped_count, summary.skipped_until) == (
        "misfire",
        3538,
        T0 + 3539 * S,
    )
    # And the other withdrawn occurrences inside its range keep their own record: skipped, paused
    assert {runs[T0 + k * S].skip_reason for k in range(3, 61)} == {"paused"}


# --- pause -> update -> resume ---------------------------------------------------------------------


def test_pause_update_resume_keeps_the_schedule_going(pipeline):
    # Given a */2-second job paused at T0+3 s, its payload edited while paused
    job = pipeline.jobs.create("acme", EVERY_TWO, T0)
    pipeline.jobs.pause("acme", job.id, T0 + 3 * S)
    current = pipeline.jobs.get("acme", job.id)
    pipeline.jobs.update("acme", job.id, {"payload": {"v": 2}}, current.version, T0 + 5 * S)
    # When resumed at T0+9 s
    pipeline.jobs.resume("acme", job.id, T0 + 9 * S)
    # Then the occurrences from the resume on are queued
    runs = _runs(pipeline, job.id)
    assert [_shape(runs[T0 + k * S]) for k in range(10, 61, 2)] == [QUEUED] * 26


def test_pause_then_a_new_schedule_then_resume_fires_the_new_schedule_from_the_resume(pipeline):
    # Given a */2-second job paused at T0+3 s, rescheduled to every 3 s at T0+5 s
    job = pipeline.jobs.create("acme", EVERY_TWO, T0)
    pipeline.jobs.pause("acme", job.id, T0 + 3 * S)
    current = pipeline.jobs.get("acme", job.id)
    pipeline.jobs.update("acme", job.id, {"schedule": "*/3 * * * * *"}, current.version, T0 + 5 * S)
    # When resumed at T0+9 s
    pipeline.jobs.resume("acme", job.id, T0 + 9 * S)
    runs = _runs(pipeline, job.id)
    # Then the new schedule's occurrences from the update on run (T0+6 s was missed by 3 s: on time)
    assert [_shape(runs[T0 + k * S]) for k in range(6, 61, 3)] == [QUEUED] * 19
    # And the old schedule's withdrawn occurrences after the edit are recorded skipped, reason
    # rescheduled (none says paused at an instant the job was active); the one before it stays paused
    old_only = [k for k in range(4, 61, 2) if k % 3]
    reasons = {k: runs[T0 + k * S].skip_reason for k in old_only}
    assert reasons == {4: "paused"} | {k: "rescheduled" for k in old_only if k > 5}


# --- a pause that races a tick (deterministic interleavings) --------------------------------------


def test_a_tick_racing_the_pause_leaves_its_runs_to_be_revived_on_resume(pipeline):
    # Given an hourly job read by a tick 30 s before its occurrence, paused right after that read
    job = pipeline.jobs.create(
        "acme", {"name": "h", "schedule": "0 * * * *", "target": {"handler": "echo"}}, T0
    )
    due = T0 + timedelta(hours=1)
    read_by_tick = pipeline.jobs.get("acme", job.id)
    pipeline.jobs.pause("acme", job.id, due - 30 * S)
    # And the tick goes on with the job it read: its run is created, then withdrawn (skipped, paused)
    pipeline.dispatcher.dispatch_jobs([read_by_tick], due - 30 * S)
    assert _runs(pipeline, job.id)[due].skip_reason == "paused"
    # When the job is resumed before the occurrence
    pipeline.jobs.resume("acme", job.id, due - 10 * S)
    # Then the occurrence is queued again: the same run, revived
    run = _runs(pipeline, job.id)[due]
    assert (run.id, _shape(run)) == (make_run_id(job.id, due), QUEUED)


def test_a_tick_that_read_the_job_before_a_pause_and_resume_revives_nothing_twice(pipeline):
    # Given a per-second job read by a tick at T0+1 s, then paused (T0+1.5 s) and resumed (T0+2 s)
    job = pipeline.jobs.create("acme", EVERY_SECOND, T0)
    read_by_tick = pipeline.jobs.get("acme", job.id)
    pipeline.jobs.pause("acme", job.id, T0 + 1.5 * S)
    pipeline.jobs.resume("acme", job.id, T0 + 2 * S)
    revived = _runs(pipeline, job.id)
    # When the stale tick goes on with the job it read
    summary = pipeline.dispatcher.dispatch_jobs([read_by_tick], T0 + S)
    # Then it creates nothing new for the revived occurrences, and the job stays active and ahead
    after = _runs(pipeline, job.id)
    assert summary.jobs_stale == 1
    assert {at: _shape(r) for at, r in after.items() if at <= T0 + 60 * S} == {
        at: _shape(r) for at, r in revived.items() if at <= T0 + 60 * S
    }
    assert all(after[T0 + k * S].state is RunState.QUEUED for k in range(0, 61))
    stored = pipeline.jobs.get("acme", job.id)
    assert str(stored.state) == "active" and stored.next_due_at > T0 + 60 * S


def test_a_revive_that_loses_to_a_concurrent_decision_keeps_the_winner(pipeline):
    # Given a per-second job paused at T0+0.5 s, and a withdrawn run that something else ended meanwhile
    job = pipeline.jobs.create("acme", EVERY_SECOND | {"misfire_grace_seconds": 1}, T0)
    pipeline.jobs.pause("acme", job.id, T0 + S / 2)
    store = pipeline.dispatcher.runs
    withdrawn = store.get(make_run_id(job.id, T0 + 3 * S))
    # (a concurrent dispatcher turned it back into a run and a worker cancelled that run)
    revived, _ = store.revive(withdrawn.__class__(**{**vars(withdrawn), "state": RunState.QUEUED}), withdrawn)
    store.transition(revived, RunState.CANCELLED, T0 + S)
    # When the resume decides it again
    pipeline.jobs.resume("acme", job.id, T0 + 6.5 * S, misfire_policy="run_all")
    # Then the stored cancelled run stands: one run for that occurrence, not overwritten
    run = store.get(make_run_id(job.id, T0 + 3 * S))
    assert run.state is RunState.CANCELLED and run.trigger is Trigger.SCHEDULE
