"""The wall clock: the one place jobsched reads the current time (entry points hold it and pass ``now``
to the services; the pure core never reads it). The protocol and the test clocks are in
:mod:`jobsched.core.clock`."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    """The wall clock, in UTC (satisfies :class:`jobsched.core.clock.Clock`)."""

    def now(self) -> datetime:
        return datetime.now(UTC)
