"""Backpressure: a tick holds back its due jobs of a priority while that priority's queue is deep or
its oldest queued run is old (docs/decisions/0007, generalised by 0028).

DESIGN §5: a flood of work must not pile up without end behind workers that cannot keep up. Each
priority of :data:`jobsched.runtime.resources.BACKPRESSURE_PRIORITIES` (``default``, ``low``; never
``high``) has a :class:`jobsched.core.backpressure.QueueLimit`: a ``depth`` (visible messages) and an
``age_seconds`` (how long the oldest run still ``queued`` there has waited since due), each 0 = off.
Before a tick enqueues runs of a priority with a limit, it reads that queue's
``ApproximateNumberOfMessages`` (one ``GetQueueAttributes``), and when the priority has an age limit,
the ages the last sweep measured (:mod:`jobsched.aws.queue_ages`, one GetItem per tick, shared by the
priorities). Over a limit (:func:`jobsched.core.backpressure.hold_reason`) the tick leaves its due
jobs of that priority untouched (not advanced, no run, no message); the next tick looks again.

The age comes from the sweeper, not from SQS: SQS has no queue attribute for it (the CloudWatch
metric ``ApproximateAgeOfOldestMessage`` is published per minute, read through a separately billed
API, and absent in the embedded mode). It is at most one sweep old; the depth read in the same tick
overrules it once the queue has drained.

At most one read per priority and one of the ages per tick of a shard, and only when the tick has a
due job of that priority. A failed read never stops dispatch: it is logged and that signal counts as
absent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from jobsched.aws.queue_ages import QueueAges, QueueAgesUnreadable
from jobsched.aws.queues import QueueReadError
from jobsched.core.backpressure import QueueLimit, age_seconds, hold_reason
from jobsched.ports.stores import RunQueue

logger = logging.getLogger(__name__)

#: Never held back, whatever the settings say.
NEVER_HELD = "high"


class Backpressure:
    """The per-priority limits and what the ticks read: the queues' depths, the sweeper's ages."""

    def __init__(
        self,
        queues: RunQueue,
        limits: Mapping[str, QueueLimit],
        ages: QueueAges | None = None,
    ):
        self.limits = {p: lim for p, lim in limits.items() if lim.active and p != NEVER_HELD}
        #: Only the depths of the priorities with a limit are read (``visible_messages``).
        self.queues = queues
        self.ages = ages

    @property
    def active(self) -> bool:
        return bool(self.limits)

    def depth(self, priority: str) -> int | None:
        """The queue's visible messages, or ``None`` if it could not be read (logged)."""
        try:
            return self.queues.visible_messages(priority)
        except QueueReadError as exc:
            logger.warning("%s queue backlog unreadable, dispatching without backpressure: %s", priority, exc)
            return None

    def oldest(self) -> dict[str, datetime]:
        """The last sweep's oldest queued due instant per priority ({} if unreadable: logged)."""
        if self.ages is None:
            return {}
        try:
            return self.ages.read()
        except QueueAgesUnreadable as exc:
            logger.warning("queue ages unreadable, dispatching without the age signal: %s", exc)
            return {}

    def tick(self, now: datetime) -> TickGate:
        """The gate for one tick at ``now``: reads each queue at most once, on its first due job."""
        return TickGate(self, now)


class TickGate:
    """Decides, for one tick, whether a due job is held back; remembers what it read and held."""

    def __init__(self, backpressure: Backpressure, now: datetime):
        self._bp = backpressure
        self._now = now
        self._reasons: dict[str, str | None] = {}  # priority -> why held (None: not held)
        self._depths: dict[str, int | None] = {}
        self._oldest: dict[str, datetime] | None = None
        self.held: dict[str, int] = {}

    def holds(self, priority: str) -> bool:
        """Whether a due job of ``priority`` is held back this tick (counted when it is)."""
        limit = self._bp.limits.get(priority)
        if limit is None:
            return False
        if priority not in self._reasons:
            depth = self._depths[priority] = self._bp.depth(priority)
            oldest = None
            deep = depth is not None and limit.depth > 0 and depth >= limit.depth
            if limit.age_seconds > 0 and depth and not deep:  # the age is read only when it decides
                if self._oldest is None:
                    self._oldest = self._bp.oldest()
                oldest = self._oldest.get(priority)
            self._reasons[priority] = hold_reason(limit, depth, oldest, self._now)
        held = self._reasons[priority] is not None
        if held:
            self.held[priority] = self.held.get(priority, 0) + 1
        return held

    def reason(self, priority: str) -> str | None:
        """Why ``priority`` was held this tick (``depth``/``age``), None if not (or not looked at)."""
        return self._reasons.get(priority)

    def log(self, shard: int) -> None:
        """One line per priority this tick held jobs of (the count the tick's summary keeps)."""
        for priority, count in sorted(self.held.items()):
            limit = self._bp.limits[priority]
            age = age_seconds((self._oldest or {}).get(priority), self._now)
            logger.info(
                "shard %s: held back %d due %s job(s) (%s): %s queue backlog %s (limit %s), oldest "
                "queued run waited %s s (limit %s)",
                shard,
                count,
                priority,
                self._reasons[priority],
                priority,
                self._depths.get(priority),
                limit.depth or "off",
                "?" if age is None else round(age),
                limit.age_seconds or "off",
            )
