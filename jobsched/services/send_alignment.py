"""A dispatcher tick's sends, aligned to the second so delayed runs surface on time (decision 0032).

``DelaySeconds`` is whole seconds counted from when SQS accepts the message, so where in its second a
message surfaces is where in its second it was sent (:mod:`jobsched.core.send_timing`). A tick fires a
fraction of a second into its minute; sent then with the delay rounded down, each run surfaces up to
a second early and its worker sleeps the rest out, billed. :class:`AlignedSends` instead:

1. sends the messages of runs already due first, at once, with no delay;
2. then sends the others in rounds of up to ``concurrency`` batches (each batch ten messages of one
   queue, the earliest due first, the batches of a round in parallel); before a round, if waiting for
   the next whole second turns a message that would surface early into one on time
   (:func:`jobsched.core.send_timing.alignment_wait`), it sleeps until that second on the injected
   ``sleep``;
3. chooses each batch's delays from the clock read just before its ``SendMessageBatch``
   (:func:`jobsched.core.send_timing.chosen_delay`): rounded up when that lands the message at most
   ``late_margin`` after its due instant, else rounded down (early; the worker waits, as before).

A long burst that carries the sends past ``late_margin`` into the second is re-aligned by step 2 at
the next round. All waits of one tick together stay within ``budget`` seconds; once it is spent, the
remaining batches take step 3's choice without waiting. One object per tick: it counts what it slept.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from jobsched.core.clock import Clock
from jobsched.core.messages import Outgoing
from jobsched.core.send_timing import alignment_wait, chosen_delay
from jobsched.ports.stores import RunQueue, SendReport

#: Messages of one ``SendMessageBatch`` (SQS's cap; :class:`RunQueues` may split a batch further by size).
BATCH = 10

Each = Callable[[Callable[[list[Outgoing]], SendReport], list[list[Outgoing]]], list[SendReport]]


@dataclass
class AlignedSends:
    """The sends of one tick (see the module docstring)."""

    clock: Clock
    sleep: Callable[[float], Any]
    late_margin: float
    budget: float
    #: Batches of a round sent at once; ``each`` runs a step over items, up to that many at a time.
    concurrency: int = 1
    each: Each | None = None
    slept: float = 0.0  # seconds this tick slept for alignment
    waits: int = 0  # how many times

    def send(self, queues: RunQueue, outgoing: list[Outgoing]) -> SendReport:
        """Send ``outgoing`` (steps 1-3 of the module docstring); the report of every message."""
        report = SendReport()
        now = self.clock.now()
        ordered = sorted(outgoing, key=lambda o: o.message.due_at)
        due = [o for o in ordered if o.message.due_at <= now]
        ahead = [o for o in ordered if o.message.due_at > now]
        if due:
            _merge(report, queues.send([replace(o, delay_seconds=0) for o in due]))
        batches = _batches(ahead)
        size = max(1, self.concurrency)
        for start in range(0, len(batches), size):
            round_ = batches[start : start + size]
            self._align([o.message.due_at for batch in round_ for o in batch])

            def timed(batch: list[Outgoing]) -> SendReport:
                sent_at = self.clock.now()
                return queues.send(
                    [
                        replace(o, delay_seconds=chosen_delay(o.message.due_at, sent_at, self.late_margin))
                        for o in batch
                    ]
                )

            results = self.each(timed, round_) if self.each else [timed(batch) for batch in round_]
            for result in results:
                _merge(report, result)
        return report

    def _align(self, dues: list[Any]) -> None:
        left = self.budget - self.slept
        if left <= 0:
            return
        wait = alignment_wait(dues, self.clock.now(), self.late_margin)
        if 0 < wait <= left:
            self.sleep(wait)
            self.slept += wait
            self.waits += 1


def _batches(items: list[Outgoing]) -> list[list[Outgoing]]:
    """Up to :data:`BATCH` messages of one queue each, in the order given (earliest due first)."""
    by_queue: dict[str, list[Outgoing]] = defaultdict(list)
    for item in items:
        by_queue[item.queue].append(item)
    batches = [q[i : i + BATCH] for q in by_queue.values() for i in range(0, len(q), BATCH)]
    return sorted(batches, key=lambda b: b[0].message.due_at)


def _merge(report: SendReport, other: SendReport) -> None:
    report.sent.extend(other.sent)
    report.failed.update(other.failed)
