"""The in-flight ledger's items per span of due instants (decision 0030): a write of many runs queued
minutes ahead is named by one item per two minutes of due instants, so each item's runs have all been
due for a while when the sweeper first reads them; a small write stays one item."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobsched.core.inflight import LEDGER_MIN_RUNS, LEDGER_SPAN, due_groups

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)


def _page(jobs: int, minutes: int) -> list[datetime]:
    """The due instants a dispatcher page of ``jobs`` per-minute jobs queues ``minutes`` ahead."""
    return [T0 + m * M for _ in range(jobs) for m in range(minutes)]


def test_a_page_of_fifteen_minutes_is_one_group_per_two_minutes_of_due_instants():
    # Given a page of 25 per-minute jobs, 15 runs each (T0 .. T0 + 14 min)
    dues = _page(25, 15)
    # When grouped
    groups = due_groups(dues)
    # Then each group spans less than the span and the groups cover every run once
    assert sorted(i for g in groups for i in g) == list(range(len(dues)))
    assert len(groups) == 8
    for group in groups:
        spread = max(dues[i] for i in group) - min(dues[i] for i in group)
        assert spread < LEDGER_SPAN and len(group) >= LEDGER_MIN_RUNS


def test_a_small_write_stays_one_item_whatever_its_span():
    # Given one per-minute job's 15 runs (fewer than the minimum per item)
    dues = _page(1, 15)
    # Then they are one group
    assert due_groups(dues) == [sorted(range(15), key=lambda i: dues[i])]


def test_a_small_last_span_joins_the_one_before():
    # Given 30 runs due at T0 and 5 due ten minutes later
    dues = [T0] * 30 + [T0 + 10 * M] * 5
    # Then the 5 join the group before (a group of 5 would cost more to write than it saves)
    assert [len(g) for g in due_groups(dues)] == [35]


def test_runs_due_at_once_are_one_group_however_many():
    # Given a backfill's 1000 runs, all due when made
    assert [len(g) for g in due_groups([T0] * 1000)] == [1000]
    assert due_groups([]) == []
