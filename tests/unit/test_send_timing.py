"""Which DelaySeconds a run's message gets, when it surfaces, and when a tick waits for the second
(jobsched.core.send_timing, decision 0032): tables of fixed aware instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.core.messages import delay_seconds
from jobsched.core.send_timing import (
    alignment_wait,
    chosen_delay,
    early_seconds,
    late_seconds,
    next_whole_second,
    surfaces_at,
)

T = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("due", "now", "margin", "expected"),
    [
        (5.0, 0.37, 0.1, 4),  # ceil would be 0.37 s late: round down, 0.63 s early
        (5.0, 0.05, 0.1, 5),  # ceil is 0.05 s late, within the margin: round up
        (5.0, 0.0, 0.1, 5),  # on a whole second both roundings agree
        (5.0, 1.1, 0.1, 4),  # exactly the margin late: round up
        (5.0, 4.5, 0.1, 0),  # under a second ahead, ceil 0.5 s late: floor 0, surfaces now
        (5.0, 4.95, 0.1, 0),  # 0.05 s ahead: ceil 1 would be 0.95 s late, floor 0 is 0.05 s early
        (5.0, 5.0, 0.1, 0),  # due now
        (5.0, 7.0, 0.1, 0),  # overdue
        (5.0, 0.05, 0.0, 4),  # margin 0: always down (the old rule)
        (1000.0, 0.0, 0.1, 900),  # capped at SQS's 900 s
        (5.3, 0.25, 0.1, 5),  # a jittered run: ceil 6 would be 0.95 s late, down to 5 (0.05 s early)
        (5.3, 0.3, 0.1, 5),  # ... sent at the same fraction as its due instant: exact
    ],
)
def test_chosen_delay_rounds_up_only_within_the_margin(due, now, margin, expected):
    # Given a run due at ``due`` and a send at ``now`` / When the delay is chosen / Then it is ``expected``
    assert chosen_delay(at(due), at(now), margin) == expected


@pytest.mark.parametrize("now", [0.0, 0.001, 0.37, 0.5, 0.999, 3.2])
def test_chosen_delay_with_margin_zero_is_the_old_floor(now):
    # Given the old rounding (floor) / When the margin is 0 / Then both give the same delay for a whole second
    assert chosen_delay(at(10), at(now), 0.0) == delay_seconds(at(10), at(now))


@pytest.mark.parametrize("now", [0.0, 0.01, 0.1, 0.37, 0.73, 0.999])
@pytest.mark.parametrize("margin", [0.05, 0.1, 0.5])
def test_a_chosen_delay_never_surfaces_later_than_the_margin_nor_a_second_early(now, margin):
    # Given any send instant and margin / When the delay is chosen for a whole-second run
    due = at(30)
    delay = chosen_delay(due, at(now), margin)
    # Then the message surfaces at most ``margin`` late and less than a second early
    assert late_seconds(due, at(now), delay) <= margin + 1e-9
    assert early_seconds(due, at(now), delay) < 1.0


def test_surfacing_is_the_send_instant_plus_the_whole_delay():
    # Given a message sent at :00.37 with 4 s / Then it surfaces at :04.37, 0.63 s before a run due at :05
    assert surfaces_at(at(0.37), 4) == at(4.37)
    assert early_seconds(at(5), at(0.37), 4) == pytest.approx(0.63)
    assert late_seconds(at(5), at(0.37), 4) == 0.0
    assert late_seconds(at(5), at(0.37), 5) == pytest.approx(0.37)


@pytest.mark.parametrize(
    ("now", "expected"),
    [(0.0, 1.0), (0.37, 1.0), (0.999999, 1.0), (59.5, 60.0)],
)
def test_next_whole_second_is_strictly_after(now, expected):
    assert next_whole_second(at(now)) == at(expected)


@pytest.mark.parametrize(
    ("dues", "now", "expected"),
    [
        ([5.0], 0.37, 0.63),  # early at :00.37, on time from :01: wait for it
        ([5.0, 10.0], 0.9, 0.1),
        ([5.0], 0.05, 0.0),  # within the margin already: ceil lands it 0.05 s late, no wait
        ([5.0], 0.0, 0.0),  # on the second
        ([0.2], 0.37, 0.0),  # already due: sent at once
        ([1.0], 0.37, 0.63),  # due at the very second waited for: delay 0 then, on time
        ([5.5], 0.37, 0.0),  # jittered: no whole-second send lands it on time, no wait
        ([5.5, 6.0], 0.37, 0.63),  # ... a whole-second run beside it still waits
        ([1000.0], 0.37, 0.0),  # beyond the 900 s cap: the worker re-delays it anyway
    ],
)
def test_alignment_wait_only_when_it_turns_an_early_message_into_an_on_time_one(dues, now, expected):
    # Given messages due at ``dues`` and a tick about to send at ``now``
    # When the wait is computed / Then it is up to the next whole second, or none
    assert alignment_wait([at(d) for d in dues], at(now), 0.1) == pytest.approx(expected)
