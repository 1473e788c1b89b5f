"""Where "now" comes from.

Service functions take ``now`` as a parameter; only entry points (Lambda handlers, the local tick
loop, the CLI) hold a :class:`Clock` and ask it once per invocation. The core only defines the
protocol and the clocks tests move by hand (:class:`FakeClock`); the wall clock,
:class:`jobsched.runtime.clock.SystemClock`, lives outside the pure core, with the other adapters.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from jobsched.core.models import require_aware


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, timezone-aware (UTC)."""
        ...


class FakeClock:
    """A clock that stands still until told to move: ``advance(seconds=5)`` or ``set(instant)``."""

    def __init__(self, start: datetime):
        self._now = require_aware(start, "FakeClock start")

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta | float | None = None, **kwargs: float) -> datetime:
        """Move forward by a ``timedelta``, a number of seconds, or ``timedelta`` keyword arguments."""
        if delta is None:
            step = timedelta(**kwargs)
        elif isinstance(delta, timedelta):
            step = delta
        else:
            step = timedelta(seconds=delta)
        if step < timedelta(0):
            raise ValueError("a clock does not go backwards; use set() to rewind explicitly")
        self._now = self._now + step
        return self._now

    def set(self, instant: datetime) -> datetime:
        self._now = require_aware(instant, "FakeClock.set")
        return self._now


#: A clock that is not advanced is a fixed clock.
FixedClock = FakeClock
