"""The history grid's pure parts (jobsched.core.history, decision 0063): offset changes found to the
second, the next fires by job state, and the resume preview taken from the dispatcher's planner."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from jobsched.core.history import (
    MAX_SCAN_DAYS,
    OffsetChange,
    offset_changes,
    resume_preview,
    resumed,
    upcoming,
)
from jobsched.core.models import Job, JobState, RunState, Trigger
from jobsched.core.run_records import new_run

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "start", "end", "expected"),
    [
        # Paris: spring forward and fall back in 2026, each at 01:00 UTC
        (
            "Europe/Paris",
            "2026-01-01T00:00:00",
            "2027-01-01T00:00:00",
            [("2026-03-29T01:00:00", 3600, 7200), ("2026-10-25T01:00:00", 7200, 3600)],
        ),
        # Lord Howe Island: a 30-minute change (10:30 -> 11:00 on 4 Oct 2026, 02:00 local)
        (
            "Australia/Lord_Howe",
            "2026-09-01T00:00:00",
            "2026-11-01T00:00:00",
            [("2026-10-03T15:30:00", 37800, 39600)],
        ),
        # UTC and a zone without DST: nothing
        ("UTC", "2026-01-01T00:00:00", "2027-01-01T00:00:00", []),
        ("Asia/Tokyo", "2026-01-01T00:00:00", "2027-01-01T00:00:00", []),
        # a span shorter than a day holding the change
        ("Europe/Paris", "2026-03-29T00:59:00", "2026-03-29T01:00:30", [("2026-03-29T01:00:00", 3600, 7200)]),
        # a change exactly at the end is in (start, end]; one exactly at the start is not
        ("Europe/Paris", "2026-03-28T01:00:00", "2026-03-29T01:00:00", [("2026-03-29T01:00:00", 3600, 7200)]),
        ("Europe/Paris", "2026-03-29T01:00:00", "2026-03-30T01:00:00", []),
    ],
)
def test_offset_changes_are_found_to_the_second(zone, start, end, expected):
    found = offset_changes(ZoneInfo(zone), _at(start), _at(end))
    assert found == [OffsetChange(_at(at), before, after) for at, before, after in expected]


def test_only_the_last_scanned_days_of_a_long_span_are_searched():
    # Given a span of 100 years in New York (DST every year of it)
    zone, end = ZoneInfo("America/New_York"), _at("2026-12-31T00:00:00")
    found = offset_changes(zone, end - timedelta(days=36_500), end)
    # Then the changes answered are those of the last MAX_SCAN_DAYS days, two a year, none older
    cutoff = end - timedelta(days=MAX_SCAN_DAYS)
    assert found == offset_changes(zone, cutoff, end)
    assert found[0].at >= cutoff and all(c.at.year > 1971 for c in found)  # New York changed in 1971 too
    assert len(found) >= 2 * (MAX_SCAN_DAYS // 366)


def _job(**fields) -> Job:
    base = Job(
        name="j",
        schedule="0 * * * *",
        id="jhist",
        tenant="acme",
        created_at=T0,
        updated_at=T0,
        next_due_at=T0 + timedelta(hours=1),
    )
    return replace(base, **fields)


def test_upcoming_follows_the_jobs_state():
    now = T0 + timedelta(minutes=30)
    active = _job()
    assert [f.at for f in upcoming(active, now, 2)] == [T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    # a backlog being dispatched: from the cursor, in the past
    behind = _job(next_due_at=T0 - timedelta(hours=2))
    assert upcoming(behind, now, 1)[0].at == T0 - timedelta(hours=2)
    # paused: after now (what fires once resumed, after the missed ones); completed or 0: none
    paused = _job(state=JobState.PAUSED, next_due_at=T0 - timedelta(hours=5))
    assert upcoming(paused, now, 1)[0].at == T0 + timedelta(hours=1)
    assert upcoming(_job(state=JobState.COMPLETED), now, 3) == []
    assert upcoming(active, now, 0) == []


def test_upcoming_carries_the_dst_note():
    job = _job(schedule="30 2 * * *", timezone="Europe/Paris", next_due_at=_at("2026-03-28T01:30:00"))
    fires = upcoming(job, _at("2026-03-27T12:00:00"), 3)
    assert [(f.at, f.note) for f in fires] == [
        (_at("2026-03-28T01:30:00"), None),
        (_at("2026-03-29T01:00:00"), "dst_gap_shifted"),
        (_at("2026-03-30T00:30:00"), None),
    ]


def test_resumed_is_active_with_the_override_or_completed_when_nothing_is_left():
    paused = _job(state=JobState.PAUSED, paused_note="n", paused_at=T0, version=4)
    again = resumed(paused, T0, "skip")
    assert (again.state, again.misfire_override, again.paused_note, again.version) == (
        JobState.ACTIVE,
        "skip",
        None,
        5,
    )
    assert resumed(replace(paused, next_due_at=None), T0, None).state is JobState.COMPLETED


def test_a_dst_gap_skip_in_the_backlog_is_named_with_its_reason():
    # Given a daily 02:30 job in Paris with dst_gap skip, paused since 27 March, read on 31 March
    job = _job(
        schedule="30 2 * * *",
        timezone="Europe/Paris",
        dst_gap="skip",
        state=JobState.PAUSED,
        next_due_at=_at("2026-03-27T01:30:00"),
    )
    now = _at("2026-03-31T12:00:00")
    outcomes = {o.policy: o for o in resume_preview(job, now, None)}
    # Then under run_all the four real occurrences run and 29 March is recorded dst_gap
    run_all = outcomes["run_all"]
    assert [at for at, _ in run_all.runs] == [
        _at(f"2026-03-{d}T0{h}:30:00") for d, h in ((27, 1), (28, 1), (30, 0), (31, 0))
    ]
    assert run_all.skipped == {"dst_gap": 1}
    assert run_all.skipped_first == _at("2026-03-29T01:00:00")
    # and under skip all four are misfire skips, with the gap's record beside them
    assert outcomes["skip"].skipped == {"misfire": 4, "dst_gap": 1}
    assert outcomes["skip"].next_at == _at("2026-04-01T00:30:00")


def test_an_overlap_policy_sees_the_previous_run_as_the_dispatcher_does():
    # Given an hourly job with overlap skip whose last run is still running, paused, 3 hours missed
    job = _job(overlap_policy="skip", state=JobState.PAUSED, next_due_at=T0 + timedelta(hours=1))
    now = T0 + timedelta(hours=3, minutes=30)
    running = replace(new_run(job, T0, Trigger.SCHEDULE, T0), state=RunState.RUNNING)
    outcomes = {o.policy: o for o in resume_preview(job, now, running)}
    # Then under run_all every missed occurrence is skipped for the overlap, none run
    assert (outcomes["run_all"].runs_count, outcomes["run_all"].skipped) == (0, {"overlap": 3})
    # and with no previous run active the first runs, and the next ones overlap it
    ended = replace(running, state=RunState.SUCCEEDED)
    outcomes = {o.policy: o for o in resume_preview(job, now, ended)}
    assert outcomes["run_all"].runs == [(T0 + timedelta(hours=1), Trigger.CATCHUP)]
    assert outcomes["run_all"].skipped == {"overlap": 2}


def test_a_preview_that_needs_more_passes_than_allowed_says_it_is_partial():
    # Given a per-minute job with run_all and max_catchup 1,000, paused for a day: 1,441 occurrences due,
    # the last two late by at most the 60 s grace (on time), 1,439 missed
    job = _job(
        schedule="* * * * *",
        misfire_policy="run_all",
        max_catchup=1000,
        state=JobState.PAUSED,
        next_due_at=T0,
    )
    now = T0 + timedelta(days=1)
    # When previewed with one planner pass (a pass queues at most 500 runs, as a tick does)
    one = {o.policy: o for o in resume_preview(job, now, None, max_passes=1)}["run_all"]
    # Then it is partial, and with the default passes it is whole: the newest 1,000 missed and the two on
    # time run, the 439 older ones are recorded skipped
    assert (one.runs_count, one.complete) == (500, False)
    whole = {o.policy: o for o in resume_preview(job, now, None)}["run_all"]
    assert (whole.runs_count, whole.skipped, whole.complete) == (1002, {"misfire": 439}, True)
