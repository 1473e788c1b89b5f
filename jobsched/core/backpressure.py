"""Backpressure arithmetic (pure): when a queue's depth or the age of its oldest run holds work back.

A priority's :class:`QueueLimit` has two signals, each off at 0:

* ``depth``: the queue's visible messages (``ApproximateNumberOfMessages``: runs ready to start that
  no worker has taken) at or over which due jobs of that priority are held back;
* ``age_seconds``: how long the oldest run still ``queued`` in that queue has waited since its due
  instant, at or over which they are held back — but only while the queue still has visible
  messages: the age is measured by the sweeper (at most one sweep old), the depth is read by the tick
  itself, so an empty queue overrules an age measured before it drained.

An unknown reading (``None``: unreadable queue, no measurement yet) never holds: backpressure is an
optimisation, dispatch comes first. Time is a parameter (aware datetimes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

DEPTH = "depth"
AGE = "age"


@dataclass(frozen=True)
class QueueLimit:
    """The backpressure limits of one priority's queue (0 = that signal is off)."""

    depth: int = 0
    age_seconds: int = 0

    @property
    def active(self) -> bool:
        return self.depth > 0 or self.age_seconds > 0


def age_seconds(oldest_due: datetime | None, now: datetime) -> float | None:
    """Seconds the oldest queued run has waited since due at ``now`` (None without a measurement;
    never negative)."""
    if oldest_due is None:
        return None
    return max(0.0, (now - oldest_due).total_seconds())


def hold_reason(
    limit: QueueLimit, depth: int | None, oldest_due: datetime | None, now: datetime
) -> str | None:
    """Why due jobs of a priority are held back at ``now`` (:data:`DEPTH` or :data:`AGE`), or None.

    ``depth`` is the queue's visible messages as the tick read them, ``oldest_due`` the due instant
    of the oldest run the last sweep found still queued there (None: none, or never measured).
    """
    if depth is None:
        return None
    if limit.depth > 0 and depth >= limit.depth:
        return DEPTH
    age = age_seconds(oldest_due, now)
    if limit.age_seconds > 0 and depth > 0 and age is not None and age >= limit.age_seconds:
        return AGE
    return None
