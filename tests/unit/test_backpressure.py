"""The backpressure decision (pure): hold back due low jobs when the low queue's backlog is too deep."""

from __future__ import annotations

import pytest

from jobsched.services.backpressure import over_limit


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
def test_over_limit(backlog, limit, holds):
    assert over_limit(backlog, limit) is holds
