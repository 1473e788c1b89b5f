"""Which held message goes out next: SQS fair-queue ordering for the embedded mode's pollers.

On AWS our queues are standard queues whose messages carry ``MessageGroupId = tenant``, which makes
them SQS *fair queues*: SQS marks a message group as a noisy neighbour and, while messages of quiet
groups are waiting, returns those first. moto returns messages in the order they were sent, so the
embedded mode's fair poller (:mod:`jobsched.local.fair_poller`) receives more than it hands out and
asks a :class:`FairSelector` which of the messages it holds to hand to the next invocation.

The rule, taken from the SQS developer guide ("How Amazon SQS fair queues work"), evaluated before
each message is picked:

* a group is **noisy** when its in-flight messages (handed to an invocation, not yet finished) are
  more than ``share`` (10 %) of all in-flight messages of the queue *and* at least ``min_in_flight``
  (30), or when its share of the recent processing time (the last ``window_seconds``, 60 s: finished
  invocations, each record counted for its invocation's duration, plus the time in-flight records
  have run so far) is more than ``time_share`` (10 %);
* while a quiet group holds a message, the oldest message of the quiet groups goes first (oldest =
  received first, which is moto's send order);
* otherwise the noisy group with the fewest in-flight messages goes first, its oldest message first;
* a message without a ``MessageGroupId`` is a group of its own, as on SQS.

Noisy messages are never dropped or held back while nothing quieter waits. The selector is pure:
the time is an argument, it makes no AWS call, and it is not thread-safe (the poller locks it).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

#: The SQS documented detection thresholds (approximate on AWS, exact here).
NOISY_SHARE = 0.10
NOISY_MIN_IN_FLIGHT = 30
NOISY_TIME_SHARE = 0.10
#: How far back "recent processing time" reaches (SQS does not say; our choice).
TIME_WINDOW_SECONDS = 60.0


def group_of(message: dict[str, Any]) -> str:
    """The message's group: its ``MessageGroupId``, or the message id (a group of its own)."""
    group = (message.get("Attributes") or {}).get("MessageGroupId")
    return str(group) if group else f"\x00{message['MessageId']}"


@dataclass
class Held:
    """A received message not yet handed out."""

    message: dict[str, Any]
    group: str
    seq: int  # receive order
    refreshed_at: float  # when its visibility timeout last (re)started: the receive or a refresh
    due: float | None  # due instant (epoch seconds) of a run message, None for anything else


class FairSelector:
    """Held messages by group, in-flight counts and recent processing time per group."""

    def __init__(
        self,
        *,
        share: float = NOISY_SHARE,
        min_in_flight: int = NOISY_MIN_IN_FLIGHT,
        time_share: float = NOISY_TIME_SHARE,
        window_seconds: float = TIME_WINDOW_SECONDS,
    ):
        self.share = share
        self.min_in_flight = min_in_flight
        self.time_share = time_share
        self.window_seconds = window_seconds
        self._groups: dict[str, deque[Held]] = {}
        self._by_id: dict[str, Held] = {}
        self._seq = 0
        self._in_flight: dict[str, int] = {}
        self._started: dict[str, tuple[str, float]] = {}  # message id -> (group, handed out at)
        self._done: deque[tuple[float, str, float]] = deque()  # (finished at, group, seconds)

    # --- holding ----------------------------------------------------------------------------------

    @property
    def held(self) -> int:
        return len(self._by_id)

    def add(self, messages: list[dict[str, Any]], now: float, dues: list[float | None]) -> None:
        """Hold received ``messages`` (``dues[i]`` is message i's due instant or None). A message
        held already (received again) keeps its place and takes the new receipt handle."""
        for message, due in zip(messages, dues, strict=True):
            known = self._by_id.get(message["MessageId"])
            if known is not None:
                known.message, known.refreshed_at = message, now
                continue
            self._seq += 1
            held = Held(message, group_of(message), self._seq, now, due)
            self._by_id[message["MessageId"]] = held
            self._groups.setdefault(held.group, deque()).append(held)

    def drop(self, message_ids: set[str]) -> None:
        """Forget held messages (their visibility could not be kept: they come back by themselves)."""
        for message_id in message_ids:
            held = self._by_id.pop(message_id, None)
            if held is not None:
                queue = self._groups[held.group]
                queue.remove(held)
                if not queue:
                    del self._groups[held.group]

    def drop_unless_received_again(self, receipts: dict[str, str]) -> None:
        """:meth:`drop` the messages whose held receipt handle is still the one in ``receipts``
        (message id -> handle): one received again meanwhile is held with its newer handle."""
        self.drop(
            {
                message_id
                for message_id, handle in receipts.items()
                if (held := self._by_id.get(message_id)) is not None
                and held.message.get("ReceiptHandle") == handle
            }
        )

    def stale(self, now: float, older_than: float) -> list[Held]:
        """Held messages whose visibility timeout (re)started more than ``older_than`` s ago."""
        return [h for h in self._by_id.values() if now - h.refreshed_at >= older_than]

    def refreshed(self, message_ids: set[str], now: float) -> None:
        for message_id in message_ids:
            if (held := self._by_id.get(message_id)) is not None:
                held.refreshed_at = now

    def ready(self, count: int, now_epoch: float, margin: float) -> tuple[bool, float | None]:
        """Whether a batch should go out now, and if not, in how many seconds at the latest.

        A batch goes out when ``count`` messages are held, or one of them is not a run, or a run is
        due within ``margin`` s (the gathering rule of :mod:`jobsched.local.pollers`)."""
        if not self._by_id:
            return False, None
        if len(self._by_id) >= count:
            return True, None
        dues = [h.due for h in self._by_id.values()]
        if any(d is None for d in dues):
            return True, None
        wait = min(d for d in dues if d is not None) - margin - now_epoch
        return (True, None) if wait <= 0 else (False, wait)

    # --- choosing ---------------------------------------------------------------------------------

    def noisy(self, now: float) -> set[str]:
        """The groups that are noisy neighbours right now (module docstring)."""
        return self._noisy_with(self._recent_times(now))

    def take(self, count: int, now: float) -> list[dict[str, Any]]:
        """Pick up to ``count`` held messages in fair order and count them in flight."""
        return [held.message for held in self.take_held(count, now)]

    def take_held(self, count: int, now: float) -> list[Held]:
        """:meth:`take`, with what was known of each message while it was held."""
        picked: list[Held] = []
        times = self._recent_times(now)
        while len(picked) < count and self._groups:
            group = self._next_group(times)
            queue = self._groups[group]
            held = queue.popleft()
            if not queue:
                del self._groups[group]
            del self._by_id[held.message["MessageId"]]
            self._in_flight[group] = self._in_flight.get(group, 0) + 1
            self._started[held.message["MessageId"]] = (group, now)
            picked.append(held)
        return picked

    def finish(self, messages: list[dict[str, Any]], now: float) -> None:
        """The invocation that had ``messages`` ended at ``now`` (whatever its outcome)."""
        for message in messages:
            started = self._started.pop(message["MessageId"], None)
            if started is None:
                continue
            group, at = started
            left = self._in_flight.get(group, 0) - 1
            if left > 0:
                self._in_flight[group] = left
            else:
                self._in_flight.pop(group, None)
            self._done.append((now, group, max(0.0, now - at)))

    def in_flight(self, group: str) -> int:
        return self._in_flight.get(group, 0)

    def _next_group(self, times: dict[str, float]) -> str:
        noisy = self._noisy_with(times)
        quiet = [g for g in self._groups if g not in noisy]
        if quiet:
            return min(quiet, key=lambda g: self._groups[g][0].seq)
        return min(self._groups, key=lambda g: (self._in_flight.get(g, 0), self._groups[g][0].seq))

    def _noisy_with(self, times: dict[str, float]) -> set[str]:
        total = sum(self._in_flight.values())
        noisy = {g for g, n in self._in_flight.items() if n >= self.min_in_flight and n > self.share * total}
        all_time = sum(times.values())
        if all_time > 0:
            noisy |= {g for g, t in times.items() if t > self.time_share * all_time}
        return noisy

    def _recent_times(self, now: float) -> dict[str, float]:
        """Processing seconds per group over the window: finished records plus in-flight ones so far."""
        while self._done and now - self._done[0][0] > self.window_seconds:
            self._done.popleft()
        times: dict[str, float] = {}
        for _, group, seconds in self._done:
            times[group] = times.get(group, 0.0) + seconds
        for group, at in self._started.values():
            times[group] = times.get(group, 0.0) + max(0.0, now - at)
        return times
