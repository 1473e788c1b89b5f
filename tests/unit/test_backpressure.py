"""When a queue's depth or the age of its oldest queued run holds work back (pure, fixed instants)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobsched.core.backpressure import AGE, DEPTH, QueueLimit, age_seconds, hold_reason

NOW = datetime(2026, 3, 2, 12, 30, 0, tzinfo=UTC)
BOTH = QueueLimit(depth=1000, age_seconds=900)


@pytest.mark.parametrize(
    ("limit", "depth", "oldest_due", "expected"),
    [
        # depth: at or over the limit holds, one below does not
        (BOTH, 1000, None, DEPTH),
        (BOTH, 999, None, None),
        # age: the oldest queued run due 15 min ago holds while the queue has visible messages
        (BOTH, 1, NOW - timedelta(seconds=900), AGE),
        (BOTH, 1, NOW - timedelta(seconds=899), None),
        # an empty queue overrules an age the sweep measured before it drained
        (BOTH, 0, NOW - timedelta(hours=2), None),
        # depth wins when both are over
        (BOTH, 5000, NOW - timedelta(hours=2), DEPTH),
        # a signal at 0 is off
        (QueueLimit(depth=0, age_seconds=900), 10**6, None, None),
        (QueueLimit(depth=1000, age_seconds=0), 5, NOW - timedelta(days=1), None),
        # unknown depth (unreadable queue) never holds, whatever the age
        (BOTH, None, NOW - timedelta(hours=2), None),
        # a run not due yet has waited nothing
        (QueueLimit(age_seconds=60), 3, NOW + timedelta(minutes=5), None),
    ],
)
def test_hold_reason(limit, depth, oldest_due, expected):
    assert hold_reason(limit, depth, oldest_due, NOW) == expected


@pytest.mark.parametrize(
    ("backlog", "limit", "holds"),
    [
        (0, 1000, False),
        (999, 1000, False),
        (1000, 1000, True),  # at the limit: held
        (5000, 1000, True),
        (5000, 0, False),  # limit 0: backpressure off
        (None, 1000, False),  # the backlog could not be read: dispatch as if none
        (0, 1, False),
        (1, 1, True),
    ],
)
def test_a_depth_limit_alone(backlog, limit, holds):
    assert (hold_reason(QueueLimit(depth=limit), backlog, None, NOW) == DEPTH) is holds


def test_age_is_seconds_since_due_never_negative():
    assert age_seconds(NOW - timedelta(minutes=20), NOW) == 1200.0
    assert age_seconds(NOW + timedelta(minutes=1), NOW) == 0.0
    assert age_seconds(None, NOW) is None


def test_a_limit_with_both_signals_off_is_inactive():
    assert not QueueLimit().active
    assert QueueLimit(age_seconds=60).active and QueueLimit(depth=1).active
