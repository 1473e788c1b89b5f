"""Misfire planning: tables of aware datetimes, then properties over random backlogs."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobsched.core.errors import ValidationError
from jobsched.core.misfire import MisfirePlan, SkipSummary, plan_misfires

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def minutes_before(*offsets: int) -> list[datetime]:
    """Due instants `offsets` minutes before NOW, oldest first."""
    return [NOW - timedelta(minutes=m) for m in sorted(offsets, reverse=True)]


def every_second(start: datetime) -> Iterator[datetime]:
    """An unbounded per-second schedule, as a lazy schedule iterator would yield it."""
    return (start + timedelta(seconds=i) for i in itertools.count())


# --- the three policies on a small backlog -------------------------------------------------------

BACKLOG = minutes_before(10, 5, 3)  # all late by more than the 60 s grace


@pytest.mark.parametrize(
    ("policy", "fire", "skipped"),
    [
        ("run_once", BACKLOG[2:], BACKLOG[:2]),
        ("run_all", BACKLOG, []),
        ("skip", [], BACKLOG),
    ],
)
def test_policy_decides_the_misfired_occurrences(policy, fire, skipped):
    # Given three occurrences missed by minutes
    # When the backlog is planned under the policy
    plan = plan_misfires(BACKLOG, NOW, policy=policy)
    # Then the policy's occurrences fire and the rest are recorded skipped
    assert plan.fire == fire
    assert plan.skipped == skipped
    assert plan.summary is None
    assert plan.resume_after == BACKLOG[-1]
    assert plan.truncated is False


def test_default_policy_is_run_once():
    # Given a backlog, When planned with defaults, Then only the latest missed occurrence fires
    assert plan_misfires(BACKLOG, NOW).fire == [BACKLOG[-1]]


@pytest.mark.parametrize("policy", ["run_once", "run_all", "skip"])
def test_occurrences_within_grace_always_fire(policy):
    # Given occurrences 60 s late (exactly the grace) and 10 s late
    due = [NOW - timedelta(seconds=60), NOW - timedelta(seconds=10), NOW]
    # When planned under any policy
    plan = plan_misfires(due, NOW, policy=policy)
    # Then they are on time: all fire, none skipped
    assert plan.fire == due
    assert plan.skipped_count == 0


def test_late_by_just_over_grace_is_a_misfire():
    # Given one occurrence 61 s late and one on time
    due = [NOW - timedelta(seconds=61), NOW - timedelta(seconds=30)]
    # When planned under skip
    plan = plan_misfires(due, NOW, policy="skip")
    # Then only the late one is skipped
    assert plan.skipped == due[:1]
    assert plan.fire == due[1:]


def test_run_once_fires_latest_misfire_and_the_on_time_ones():
    # Given an outage: two misfired occurrences, then one within the grace
    due = [*minutes_before(3, 2), NOW - timedelta(seconds=20)]
    # When planned under run_once
    plan = plan_misfires(due, NOW, policy="run_once")
    # Then the latest misfire fires (catch-up) together with the on-time one, oldest first
    assert plan.fire == due[1:]
    assert plan.skipped == due[:1]


def test_custom_grace_widens_on_time_window():
    # Given occurrences 3 and 5 minutes late, and a 4-minute grace
    due = minutes_before(5, 3)
    # When planned under skip
    plan = plan_misfires(due, NOW, policy="skip", grace=timedelta(minutes=4))
    # Then the 3-minute-late one is on time
    assert plan.fire == due[1:]
    assert plan.skipped == due[:1]


def test_run_all_caps_catchup_at_the_most_recent_occurrences():
    # Given five misfired occurrences and max_catchup=2
    due = minutes_before(50, 40, 30, 20, 10)
    # When planned under run_all
    plan = plan_misfires(due, NOW, policy="run_all", max_catchup=2)
    # Then the two most recent fire, oldest first, and the older three are skipped
    assert plan.fire == due[3:]
    assert plan.skipped == due[:3]


def test_empty_due_plans_nothing():
    plan = plan_misfires([], NOW)
    assert plan == MisfirePlan(fire=[], skipped=[], summary=None, resume_after=None)


# --- many skips become one summary ---------------------------------------------------------------


def test_many_skips_become_one_summary_with_count_and_range():
    # Given a per-second schedule paused for one hour
    start = NOW - timedelta(hours=1)
    due = [start + timedelta(seconds=i) for i in range(3600)]  # up to 1 s before NOW
    # When planned under run_once
    plan = plan_misfires(due, NOW, policy="run_once", max_individual_skips=100)
    # Then the misfires are one summary record, and the latest misfire plus the on-time ones fire
    late_cut = NOW - timedelta(seconds=61)  # the latest misfired instant
    assert plan.skipped == []
    assert plan.summary == SkipSummary(count=3600 - 61, first=start, last=late_cut - timedelta(seconds=1))
    assert plan.fire[0] == late_cut
    assert len(plan.fire) == 61


def test_skips_up_to_the_limit_stay_individual():
    # Given exactly max_individual_skips occurrences to skip
    due = minutes_before(*range(2, 7))
    # When planned under skip with max_individual_skips=5
    plan = plan_misfires(due, NOW, policy="skip", max_individual_skips=5)
    # Then all five are listed and there is no summary
    assert plan.skipped == due
    assert plan.summary is None


def test_zero_individual_skips_always_summarises():
    due = minutes_before(3, 2)
    plan = plan_misfires(due, NOW, policy="skip", max_individual_skips=0)
    assert plan.summary == SkipSummary(count=2, first=due[0], last=due[1])


# --- lazy, unbounded input -------------------------------------------------------------------------


def test_unbounded_iterator_stops_at_first_future_instant():
    # Given a lazy per-second schedule that started 10 s ago and never ends
    due = every_second(NOW - timedelta(seconds=10))
    # When planned
    plan = plan_misfires(due, NOW)
    # Then the 11 instants up to NOW fire, and the first future one is reported, not lost
    assert len(plan.fire) == 11
    assert plan.next_due == NOW + timedelta(seconds=1)
    assert plan.truncated is False


def test_limit_truncates_a_huge_backlog_and_resume_completes_it():
    # Given a per-second schedule paused for a day (86,400 misfired occurrences), limit 10,000
    start = NOW - timedelta(days=1)
    calls, resume, fired, skipped = 0, None, [], 0
    # When the caller keeps planning from resume_after until nothing is truncated
    while True:
        begin = start if resume is None else resume + timedelta(seconds=1)
        plan = plan_misfires(every_second(begin), NOW, policy="run_once", limit=10_000)
        calls += 1
        fired += plan.fire
        skipped += plan.skipped_count
        resume = plan.resume_after
        if not plan.truncated:
            break
    # Then every instant up to NOW was decided once: the latest misfire and the on-time ones fire
    assert calls == 9
    assert fired[0] == NOW - timedelta(seconds=61)
    assert fired[-1] == NOW
    assert len(fired) + skipped == 86_401


def test_truncated_run_once_chunk_fires_nothing_and_leaves_the_latest_undecided():
    # Given more misfired occurrences than the limit
    due = minutes_before(*range(10, 30))
    # When planned with limit 5
    plan = plan_misfires(due, NOW, policy="run_once", limit=5)
    # Then the first four are skipped, the fifth stays undecided, and the plan resumes after the 4th
    assert plan.truncated is True
    assert plan.fire == []
    assert plan.skipped == due[:4]
    assert plan.resume_after == due[3]


def test_limit_must_exceed_the_catchup_kept():
    with pytest.raises(ValidationError) as error:
        plan_misfires(BACKLOG, NOW, policy="run_all", max_catchup=10, limit=10)
    assert error.value.field == "limit"


# --- time zones and bad input ----------------------------------------------------------------------


def test_repeated_local_hour_folds_are_distinct_and_lateness_is_real_time():
    # Given the two 01:30 of New York's fall-back night (same wall time, same tzinfo, an hour apart)
    ny = ZoneInfo("America/New_York")
    first = datetime(2026, 11, 1, 1, 30, tzinfo=ny, fold=0)
    second = datetime(2026, 11, 1, 1, 30, tzinfo=ny, fold=1)
    now = datetime(2026, 11, 1, 1, 31, tzinfo=ny, fold=1)  # one minute after the second
    # When planned under skip
    plan = plan_misfires([first, second], now, policy="skip")
    # Then the first (61 minutes late) is skipped and the second (60 s late) is on time
    assert plan.skipped == [first]
    assert plan.fire == [second]


def test_mixed_zones_are_compared_as_instants():
    # Given an instant expressed in Tokyo time, 30 s before NOW
    tokyo = (NOW - timedelta(seconds=30)).astimezone(ZoneInfo("Asia/Tokyo"))
    # When planned with a UTC now, Then it is on time
    assert plan_misfires([tokyo], NOW, policy="skip").fire == [tokyo]


@pytest.mark.parametrize(
    ("due", "now"),
    [
        ([datetime(2026, 12, 1, 11, 0)], NOW),
        (BACKLOG, datetime(2026, 12, 1, 12, 0)),
    ],
    ids=["naive due", "naive now"],
)
def test_naive_datetimes_are_rejected(due, now):
    with pytest.raises(ValueError, match="timezone-aware"):
        plan_misfires(due, now)


@pytest.mark.parametrize("due", [[BACKLOG[1], BACKLOG[0]], [BACKLOG[0], BACKLOG[0]]], ids=["desc", "dup"])
def test_out_of_order_due_is_rejected(due):
    with pytest.raises(ValueError, match="strictly ascending"):
        plan_misfires(due, NOW)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"policy": "fire_all"}, "misfire_policy"),
        ({"grace": timedelta(seconds=-1)}, "misfire_grace"),
        ({"max_catchup": 0}, "max_catchup"),
        ({"max_individual_skips": -1}, "max_individual_skips"),
    ],
)
def test_bad_settings_raise_validation_error_naming_the_field(kwargs, field):
    with pytest.raises(ValidationError) as error:
        plan_misfires(BACKLOG, NOW, **kwargs)
    assert error.value.field == field


def test_unknown_policy_message_lists_allowed_ones():
    with pytest.raises(ValidationError, match="'fire_all'; allowed: run_once, run_all, skip"):
        plan_misfires(BACKLOG, NOW, policy="fire_all")


# --- properties ------------------------------------------------------------------------------------

offsets = st.lists(st.integers(min_value=0, max_value=7200), min_size=0, max_size=60, unique=True)


@settings(max_examples=300, deadline=None)
@given(
    secs=offsets,
    policy=st.sampled_from(["run_once", "run_all", "skip"]),
    max_catchup=st.integers(1, 10),
    max_individual_skips=st.integers(0, 20),
    grace=st.integers(0, 300),
)
def test_plan_partitions_the_due_instants(secs, policy, max_catchup, max_individual_skips, grace):
    # Given any backlog of distinct instants at or before NOW
    due = sorted(NOW - timedelta(seconds=s) for s in secs)
    # When planned without truncation
    plan = plan_misfires(
        due,
        NOW,
        policy=policy,
        grace=timedelta(seconds=grace),
        max_catchup=max_catchup,
        max_individual_skips=max_individual_skips,
    )
    # Then fired + skipped (listed or summarised) is exactly the due list, without overlap
    summarised = [t for t in due if plan.summary.first <= t <= plan.summary.last] if plan.summary else []
    assert plan.summary is None or plan.summary.count == len(summarised)
    assert sorted(plan.fire + plan.skipped + summarised) == due
    assert len(plan.fire) + plan.skipped_count == len(due)
    # And skipped ones are all older than fired ones, on-time ones always fire
    skipped_all = plan.skipped + summarised
    assert not skipped_all or not plan.fire or max(skipped_all) < min(plan.fire)
    on_time = [t for t in due if NOW - t <= timedelta(seconds=grace)]
    assert set(on_time) <= set(plan.fire)
    late_fired = len(plan.fire) - len(on_time)
    expected_late = {"run_once": 1, "run_all": max_catchup, "skip": 0}[policy]
    assert late_fired == min(expected_late, len(due) - len(on_time))


@settings(max_examples=150, deadline=None)
@given(
    secs=offsets,
    policy=st.sampled_from(["run_once", "run_all", "skip"]),
    max_catchup=st.integers(1, 5),
    limit_extra=st.integers(1, 10),
)
def test_resuming_truncated_plans_decides_the_same_as_one_plan(secs, policy, max_catchup, limit_extra):
    # Given any backlog, and a limit small enough to truncate
    due = sorted(NOW - timedelta(seconds=s) for s in secs)
    keep = {"run_once": 1, "run_all": max_catchup, "skip": 0}[policy]
    whole = plan_misfires(due, NOW, policy=policy, max_catchup=max_catchup)
    # When planned in chunks, each resuming strictly after the previous resume_after
    fired, skipped, resume = [], 0, None
    for _ in range(len(due) + 1):
        rest = [t for t in due if resume is None or t > resume]
        plan = plan_misfires(rest, NOW, policy=policy, max_catchup=max_catchup, limit=keep + limit_extra)
        fired += plan.fire
        skipped += plan.skipped_count
        resume = plan.resume_after if plan.resume_after is not None else resume
        if not plan.truncated:
            break
    # Then the chunks fire exactly what a single plan fires, and skip the rest
    assert plan.truncated is False
    assert fired == whole.fire
    assert skipped == whole.skipped_count
