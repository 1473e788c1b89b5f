"""Backpressure on the ``low`` queue: a tick holds back its due ``low`` jobs while the queue is deep.

DESIGN §5: a flood of low-priority work must not pile up without end behind a queue whose workers
cannot keep up. Before a tick enqueues runs of ``low`` jobs it reads the ``low`` queue's
``ApproximateNumberOfMessages`` — the visible backlog: messages ready to run that no worker has taken
(delayed and in-flight messages are not counted). At or over the limit the tick leaves its due ``low``
jobs untouched (not advanced, no run, no message); the next tick looks again. ``high`` and ``default``
jobs are never held back.

Depth is the signal, not the age of the oldest message: SQS has no queue attribute for that age (it is
the CloudWatch metric ``ApproximateAgeOfOldestMessage``, published per minute and read through a
separate, slower API), while ``GetQueueAttributes`` answers from the queue itself for one request.

At most one ``GetQueueAttributes`` per tick of a shard, and only when the tick has a due ``low`` job.
A failed read never stops dispatch: it is logged and the tick dispatches as if there were no backlog.
"""

from __future__ import annotations

import logging
from typing import Any

from jobsched.aws.metering import Meter
from jobsched.aws.queues import QueueReadError, RunQueues

logger = logging.getLogger(__name__)

HELD_PRIORITY = "low"


def over_limit(backlog: int | None, limit: int) -> bool:
    """Whether a backlog of ``backlog`` messages holds back ``low`` work (``limit`` 0 = never; an
    unknown backlog, ``None``, never holds)."""
    return limit > 0 and backlog is not None and backlog >= limit


class LowBacklog:
    """Reads the ``low`` queue's visible backlog (one metered ``GetQueueAttributes``)."""

    def __init__(self, sqs: Any, queue_url: str, limit: int, meter: Meter | None = None):
        self.queues = RunQueues(sqs, {HELD_PRIORITY: queue_url}, meter)
        self.limit = limit

    def read(self) -> int | None:
        """The number of visible messages, or ``None`` if the queue could not be read (logged)."""
        try:
            return self.queues.visible_messages(HELD_PRIORITY)
        except QueueReadError as exc:
            logger.warning("low queue backlog unreadable, dispatching without backpressure: %s", exc)
            return None

    def tick(self) -> TickGate:
        """The gate for one tick: reads the queue at most once, on the first due ``low`` job."""
        return TickGate(self)


class TickGate:
    """Decides, for one tick, whether a due job is held back; counts what it held."""

    def __init__(self, backlog: LowBacklog):
        self._backlog = backlog
        self._hold: bool | None = None  # undecided until the first due low job
        self.seen_backlog: int | None = None

    def holds(self, priority: str) -> bool:
        if priority != HELD_PRIORITY or self._backlog.limit <= 0:
            return False
        if self._hold is None:
            self.seen_backlog = self._backlog.read()
            self._hold = over_limit(self.seen_backlog, self._backlog.limit)
        return self._hold

    def log(self, shard: int, held: int) -> None:
        """One line per tick that held ``held`` jobs back (the count the tick's summary keeps)."""
        if held:
            logger.info(
                "shard %s: held back %d due low job(s): low queue backlog %s >= limit %d",
                shard,
                held,
                self.seen_backlog,
                self._backlog.limit,
            )
