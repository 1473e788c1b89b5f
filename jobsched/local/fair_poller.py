"""A queue poller that serves message groups (tenants) the way SQS fair queues do.

:class:`FairQueuePoller` is a :class:`~jobsched.local.pollers.QueuePoller` whose receivers do not wait
for a free worker slot: they receive whatever is visible (up to ``hold_limit`` messages held) into a
:class:`~jobsched.local.fairness.FairSelector`, and a dispatcher thread, whenever a slot is free,
takes the next batch from it in fair order (quiet groups first; see :mod:`jobsched.local.fairness`).
So a tenant's run that arrives behind another tenant's backlog goes out with the next free slot, as
SQS returns a quiet group's message first, although moto itself returns messages in send order.

Visibility stays what SQS would have it. A held message is invisible in moto from its receive; the
poller keeps it so:

* every held message whose visibility timeout (re)started a third of a timeout ago or more is
  extended by a whole timeout (``ChangeMessageVisibilityBatch``, checked every
  ``REFRESH_CHECK_SECONDS`` or a sixth of the timeout, whichever is less), so at least half a timeout
  is left when it is extended: a busy machine that runs the check late does not let it expire;
* a batch's messages held for more than ``HANDOUT_REFRESH_SECONDS`` (or a quarter of the timeout)
  get a whole timeout again as they are handed out, so an invocation sees the visibility a fresh
  receive would have given it;
* a message whose visibility could not be changed (SQS refused) is dropped from the hold, never
  handed out late: it becomes visible again by itself and is received anew.

The receive count is not touched by holding (one receive per delivery, as with Lambda), so the
redrive to the DLQ after ``maxReceiveCount`` deliveries is unchanged. Messages still held when the
poller stops are abandoned, like the records of a crashed invocation: they come back after their
visibility timeout. Runs not yet due are gathered exactly as by the plain poller: a partial batch of
them goes out when it is full or its earliest run is ``GATHER_MARGIN_SECONDS`` from due.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from jobsched.aws.metering import Meter
from jobsched.aws.queues import set_visibility_batch
from jobsched.local.fairness import FairSelector, Held
from jobsched.local.pollers import GATHER_MARGIN_SECONDS, MAX_BATCH, MAX_RECEIVERS, QueuePoller, due_epoch

log = logging.getLogger(__name__)

#: Messages one poller holds at most (received, not yet handed out); receives pause beyond it.
HOLD_LIMIT = 3000
#: How often the held messages' visibility is checked (a sixth of the timeout if that is less).
REFRESH_CHECK_SECONDS = 1.0
#: The share of the visibility timeout a held message may spend before it is extended.
REFRESH_AFTER_SHARE = 1 / 3
#: A message held longer than this (or a quarter of the timeout) gets a whole timeout again when it
#: is handed out.
HANDOUT_REFRESH_SECONDS = 1.0


class FairQueuePoller(QueuePoller):
    """Receives ahead into a :class:`FairSelector` and hands batches out in fair order."""

    def __init__(self, *, hold_limit: int = HOLD_LIMIT, selector: FairSelector | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.hold_limit = max(self.batch_size, hold_limit)
        self.selector = selector or FairSelector()
        self._changed = threading.Condition(self._lock)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"poller-{self.name}", daemon=True)
        self._helpers = [
            threading.Thread(target=self._helper_loop, name=f"poller-{self.name}-{i}", daemon=True)
            for i in range(1, MAX_RECEIVERS)
        ]
        self._helpers.append(
            threading.Thread(target=self._dispatch_loop, name=f"poller-{self.name}-out", daemon=True)
        )
        self._helpers.append(
            threading.Thread(target=self._refresh_loop, name=f"poller-{self.name}-vis", daemon=True)
        )
        for thread in [self._thread, *self._helpers]:
            thread.start()

    @property
    def held(self) -> int:
        """How many received messages wait here for a slot."""
        with self._lock:
            return self.selector.held

    # --- receiving --------------------------------------------------------------------------------

    def _poll_once(self, *, short: bool = False) -> bool | None:
        """Receive into the hold. True when messages came, False when the receive was empty, None
        when the hold was full or the receive failed."""
        with self._lock:
            room = self.hold_limit - self.selector.held
            if room <= 0:
                self._changed.wait(0.2)
                return None
        try:
            messages = self._receive(min(MAX_BATCH, room), short=short)
        except Exception:
            if not self.stop_event.is_set():
                log.exception("receive from %s failed", self.name)
                self.stop_event.wait(1.0)
            return None
        if not messages:
            return False
        dues = [due_epoch(m.get("Body", "")) for m in messages]
        with self._lock:
            self.selector.add(messages, time.monotonic(), dues)
            self._changed.notify_all()
        return True

    # --- handing out ------------------------------------------------------------------------------

    def _dispatch_loop(self) -> None:
        while not self.stop_event.is_set():
            if not self._free.acquire(timeout=0.5):
                continue
            batch = self._next_batch()
            if not batch:
                self._free.release()
                continue
            thread = threading.Thread(
                target=self._run_held, args=(batch,), name=f"worker-{self.name}", daemon=True
            )
            with self._lock:
                self._busy.add(thread)
            thread.start()

    def _next_batch(self) -> list[Held]:
        """Wait (at most 0.5 s) until a batch is ready and take it (empty if none was)."""
        deadline = time.monotonic() + 0.5
        with self._lock:
            while not self.stop_event.is_set():
                ready, wait = self.selector.ready(self.batch_size, time.time(), GATHER_MARGIN_SECONDS)
                if ready:
                    return self.selector.take_held(self.batch_size, time.monotonic())
                left = deadline - time.monotonic()
                if left <= 0:
                    return []
                self._changed.wait(min(left, wait if wait is not None else left))
        return []

    def _run_held(self, batch: list[Held]) -> None:
        """In the batch's own thread: restart the visibility of what waited, then invoke."""
        messages = [h.message for h in batch]
        try:
            after = min(HANDOUT_REFRESH_SECONDS, self._visibility_seconds() / 4)
            now = time.monotonic()
            waited = [h.message for h in batch if now - h.refreshed_at > after]
            failed = self._extend(waited) if waited else set()
        except Exception:
            if not self.stop_event.is_set():
                log.exception("restarting the visibility of a batch on %s failed", self.name)
            failed = {m["MessageId"] for m in messages}
        if failed:  # let go, never handed out late: they come back by themselves
            with self._lock:
                self.selector.finish([m for m in messages if m["MessageId"] in failed], time.monotonic())
            messages = [m for m in messages if m["MessageId"] not in failed]
        self._run_batch(messages)

    def _run_batch(self, messages: list[dict[str, Any]]) -> None:
        try:
            if messages:
                self.process(messages)
        except Exception:
            if not self.stop_event.is_set():
                log.exception("batch on %s failed", self.name)
        finally:
            with self._lock:
                self.selector.finish(messages, time.monotonic())
                self._busy.discard(threading.current_thread())
                self._changed.notify_all()
            self._free.release()

    # --- visibility -------------------------------------------------------------------------------

    def _refresh_loop(self) -> None:
        every = REFRESH_CHECK_SECONDS
        while not self.stop_event.wait(every):
            try:
                every = min(REFRESH_CHECK_SECONDS, self._visibility_seconds() / 6)
                self.refresh_held()
            except Exception:
                if not self.stop_event.is_set():
                    log.exception("keeping held messages of %s invisible failed", self.name)

    def refresh_held(self) -> int:
        """Extend the held messages whose visibility is a third spent; returns how many were extended."""
        spent = self._visibility_seconds() * REFRESH_AFTER_SHARE
        with self._lock:
            stale: list[Held] = self.selector.stale(time.monotonic(), spent)
        messages = [h.message for h in stale]
        asked = time.monotonic()  # the new timeout runs from the request, not from its answer
        failed = self._extend(messages)
        with self._lock:
            self.selector.drop_unless_received_again(
                {m["MessageId"]: m["ReceiptHandle"] for m in messages if m["MessageId"] in failed}
            )
            self.selector.refreshed({m["MessageId"] for m in messages} - failed, asked)
        return len(messages) - len(failed)

    def _extend(self, messages: list[dict[str, Any]]) -> set[str]:
        """Give ``messages`` a whole visibility timeout from now (ten per ``ChangeMessageVisibilityBatch``,
        :func:`jobsched.aws.queues.set_visibility_batch`, which logs what SQS refused); returns the ids
        SQS refused. The emulated event source mapping's own calls: not metered as the functions' are.
        After a stop, none is asked for and every one counts as refused (let go, never handed out
        late), without the warning a request to the departing emulator would log."""
        if not messages:
            return set()
        if self.stop_event.is_set():
            return {m["MessageId"] for m in messages}
        refused = set_visibility_batch(
            self.sqs,
            self.queue_url,
            [m["ReceiptHandle"] for m in messages],
            int(self._visibility_seconds()),
            Meter(),
        )
        return {m["MessageId"] for m in messages if m["ReceiptHandle"] in refused}
