"""Fair shares of a pool's invocations: head-room only other tenants use (issue 31 §7, decision 0057).

A pool (a Lambda queue's mapping, an embedded poller) runs at most ``ceil(slots / fair_share)``
invocations; one tenant may hold at most ``slots`` of them (today's ceiling, so a tenant alone has
what it had). The rest is **head-room**: while a tenant holds its ``slots``, an invocation that
receives its runs does not start them, so a slot stays for another tenant's runs, which SQS fair
queues hand to whichever invocation receives next. So a quiet tenant's run does not wait for a
bursting tenant's run to end, however long those runs are.

:meth:`ShareGate.enter` decides once per invocation (a batch), before any record is handled, per
tenant of the batch:

1. **look**: one eventually consistent read of the tenant's item (``share#<queue>#<tenant>`` in the
   Leases table, a semaphore whose holders are invocations, not runs) and, when the gate knows the
   deployment's ``fair_share``, of the pool's ceiling item (``pool#<queue>``, written by the capacity
   function) in the same ``BatchGetItem`` (a process that read that item less than
   :data:`CEILING_FRESH_SECONDS` ago goes by what it read, and reads the share item alone); the live
   holders, with the invocations this process runs for the tenant (registered or not yet:
   :data:`PROCESS_HOLDS`), are the tenant's holds, and its
   ``slots`` are :func:`~jobsched.core.shares.tenant_slots_at` of the ceiling in force (the base
   ``slots`` when the item is missing or lapsed): a raised ceiling raises them, a lowered one lowers
   them (runs already running finish; a tenant over its new slots is admitted again once under);
2. **admitted** when they are fewer than ``slots``. The invocation registers as a holder (a
   conditional write, at most ``slots``) at once when the tenant already holds half its slots or
   more; otherwise only if it still runs :data:`REGISTER_AFTER_SECONDS` later (short invocations,
   most of them, never write: the cost benchmark's single tenant pays only the read). A registered
   invocation renews its entry every third of :data:`SHARE_LEASE_SECONDS` and removes it when it ends;
3. **held** when the tenant holds its slots: the invocation keeps the batch and looks again every
   :data:`POLL_SECONDS`, up to :data:`HOLD_SECONDS`; when one of the tenant's invocations ends
   meanwhile, this one takes its place (registered at once), so a tenant's own freed slot never idles
   while its runs wait in a head-room invocation;
4. **refused** when the hold ends and the tenant still holds its slots: the records are made visible
   again at once (one ``ChangeMessageVisibilityBatch`` to 0 for the batch) and left in the queue
   (Lambda's partial batch response); a record received
   :data:`~jobsched.services.limits.RESEND_AT_RECEIVE` times or more is re-sent as a fresh copy and
   acknowledged instead, so refusals never redrive a run to the DLQ.

A record whose body names no tenant (not a run message) is admitted without looking.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from jobsched.aws.limits_store import epoch_ms, share_key
from jobsched.core.clock import Clock
from jobsched.core.messages import RunMessage
from jobsched.core.shares import holds, live, tenant_slots_at
from jobsched.ports.stores import ConcurrencySlots, PoolCeiling, RunQueue
from jobsched.runtime import observability as obs
from jobsched.services.deliveries import Delivery
from jobsched.services.limits import RESEND_AT_RECEIVE
from jobsched.targets.executor import KeptThreads

logger = logging.getLogger(__name__)

#: An admitted invocation that still runs this long registers as a holder (shorter ones never write).
REGISTER_AFTER_SECONDS = 0.5
#: How long an invocation whose tenant holds its slots keeps the batch, waiting for one to free.
HOLD_SECONDS = 0.25
#: How often a held invocation looks again at its tenant's holders (one read each).
POLL_SECONDS = 0.125
#: A registered invocation's lease (renewed every third of it while it runs): a crashed one's entry
#: stops counting after this long.
SHARE_LEASE_SECONDS = 60.0
#: How long a process goes by a pool's ceiling item it read: its looks within that time read the
#: tenant's share item alone (half a read unit), the others read both in one BatchGetItem.
CEILING_FRESH_SECONDS = 10.0


class ProcessHolds:
    """The invocations this process runs now, per share key (thread-safe). On Lambda a container runs
    one invocation at a time; the embedded mode's pollers and the container worker run many in one
    process, and count them here exactly, before any of them has registered."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._holds: dict[str, set[str]] = {}
        #: Invocations of this process that ended, by key, with when: their registrations may still be
        #: in the item (the release is written after), but this process knows they hold nothing.
        self._ended: dict[str, dict[str, float]] = {}
        self._monotonic = monotonic

    def _others(self, key: str, registered: set[str]) -> set[str]:
        ended = self._ended.get(key)
        if ended:
            cutoff = self._monotonic() - SHARE_LEASE_SECONDS
            for name in [n for n, at in ended.items() if at < cutoff]:
                del ended[name]
            return registered - set(ended)
        return registered

    def take_if_under(self, key: str, owner: str, registered: set[str], slots: int) -> bool:
        """Add ``owner`` to ``key``'s holds if the tenant (``registered`` and this process's) holds
        fewer than ``slots`` without it; atomically with the other threads of this process."""
        with self._lock:
            mine = self._holds.setdefault(key, set())
            if holds(self._others(key, registered), mine, owner) >= slots:
                return False
            mine.add(owner)
            return True

    def count(self, key: str, registered: set[str], owner: str) -> int:
        with self._lock:
            return holds(self._others(key, registered), self._holds.get(key, set()), owner)

    def discard(self, key: str, owner: str, *, ended: bool = False) -> None:
        """Take ``owner`` off ``key``'s holds (``ended``: its invocation ended, so a registration of it
        the item still shows no longer counts here)."""
        with self._lock:
            held = self._holds.get(key)
            if held is not None:
                held.discard(owner)
                if not held:
                    del self._holds[key]
            if ended:
                self._ended.setdefault(key, {})[owner] = self._monotonic()


class PoolReadings:
    """The pools' ceiling items as this process last read them, and when (thread-safe): a worker is
    built per invocation, so the readings live here for the process's life, keyed by the deployment's
    Leases table and the queue."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], tuple[float, PoolCeiling | None]] = {}

    def fresh(self, scope: str, queue: str, now: float) -> tuple[bool, PoolCeiling | None]:
        """(True, the item) if it was read less than :data:`CEILING_FRESH_SECONDS` before ``now``."""
        with self._lock:
            seen = self._seen.get((scope, queue))
        if seen is not None and 0 <= now - seen[0] < CEILING_FRESH_SECONDS:
            return True, seen[1]
        return False, None

    def note(self, scope: str, queue: str, now: float, pool: PoolCeiling | None) -> None:
        with self._lock:
            self._seen[(scope, queue)] = (now, pool)


#: This process's readings of the pools' ceiling items (shared by every :class:`ShareGate`).
PROCESS_POOLS = PoolReadings()


def tenant_of(key: str) -> str:
    """The tenant of a share key (``share#<queue>#<tenant>``)."""
    return key.split("#", 2)[2]


#: This process's invocations (shared by every :class:`ShareGate` of the process).
PROCESS_HOLDS = ProcessHolds()

#: The threads that hold a batch's waiting tenants beside its admitted records (:meth:`Share.run`).
_HOLDS = KeptThreads("share-hold")


@dataclass
class Share:
    """What :meth:`ShareGate.enter` decided for one invocation: the records to handle, the ids to leave
    in the queue, and the holds to give back with :meth:`exit`."""

    gate: ShareGate | None
    owner: str
    admitted: list[Delivery]
    deferred: list[str] = field(default_factory=list)  # message ids refused and left in the queue
    refused: list[str] = field(default_factory=list)  # every refused message id (deferred or re-sent)
    keys: list[str] = field(default_factory=list)  # share keys held (in this process)
    registered: set[str] = field(default_factory=set)  # of those, registered in the Leases table
    #: Per share key, the records of a tenant that held its slots at the first look: :meth:`settle`
    #: holds them (up to ``hold_until``), then admits or refuses them.
    waiting: dict[str, list[Delivery]] = field(default_factory=dict)
    hold_until: float = 0.0  # the gate's monotonic clock: when the hold of ``waiting`` ends
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def settle(self) -> list[Delivery]:
        """Hold the :attr:`waiting` tenants' records (:meth:`ShareGate.settle`); the records admitted
        meanwhile (also added to :attr:`admitted`), the others refused."""
        if self.gate is None or not self.waiting:
            return []
        return self.gate.settle(self)

    def run(self, process: Callable[[list[Delivery], int], list[str]], concurrency: int) -> list[str]:
        """Handle the batch with ``process(records, concurrency)`` (the worker's ``process_batch``,
        which returns the message ids to leave in the queue): the records admitted at the first look
        at once, *beside* the hold of the tenants at their slots (:meth:`settle`, on a thread of its
        own), whose records admitted by it are handled as soon as it admits them. So a quiet tenant's
        run received in one batch with a bursting tenant's never waits out that tenant's hold (a
        batch on SQS fair queues mixes message groups). The ids of every record ``process`` reported;
        the refused ones are in :attr:`deferred`. At most ``concurrency`` records at once, but one
        more while the records admitted at once fill it (the held ones get at least one thread)."""
        now_records = list(self.admitted)
        if not self.waiting:
            return process(now_records, concurrency) if now_records else []
        if not now_records:  # the whole batch waits: nothing to run beside the hold
            late = self.settle()
            return process(late, concurrency) if late else []
        failed_late: list[str] = []
        escaped: list[BaseException] = []
        late_threads = max(1, concurrency - len(now_records))

        def hold_then_run() -> None:
            try:
                late = self.settle()
                if late:
                    failed_late.extend(process(late, late_threads))
            except BaseException as exc:  # raised in the invocation's thread, as a direct call would
                escaped.append(exc)

        held = _HOLDS.run(functools.partial(contextvars.copy_context().run, hold_then_run))
        try:
            failed = process(now_records, concurrency)
        finally:
            held.wait()
        if escaped:
            raise escaped[0]
        return failed + failed_late

    def exit(self, now: datetime) -> None:
        """Give back every hold: remove the registrations (one write each) and this process's counts.
        Safe to call more than once."""
        if self.gate is None:
            return
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with self._lock:
            keys, self.keys = self.keys, []
            registered, self.registered = self.registered, set()
        for key in keys:  # this process stops counting it first, then the registration goes
            self.gate.process.discard(key, self.owner, ended=True)
        for key in keys:
            if key in registered:
                try:
                    with obs.request_lane(tenant_of(key)):
                        self.gate.slots.release(key, self.owner, now)
                except Exception:  # its lease ends on its own
                    logger.exception("could not release the share %s of %s", key, self.owner)

    def register(self, now: datetime) -> None:
        """Register every hold not registered yet (the lazy registration), renew the others."""
        if self.gate is None:
            return
        with self._lock:
            keys = list(self.keys)
        for key in keys:
            if self._stop.is_set():
                return
            try:
                with obs.request_lane(tenant_of(key)):
                    if key in self.registered:
                        self.gate.slots.renew(
                            key, self.owner, self.gate.slots_of(key), now, SHARE_LEASE_SECONDS
                        )
                        continue
                    refusal = self.gate.slots.acquire(
                        key, self.owner, self.gate.slots_of(key), now, SHARE_LEASE_SECONDS
                    )
            except Exception:
                logger.exception("could not register the share %s of %s", key, self.owner)
                continue
            if refusal is None:
                with self._lock:
                    if key in self.keys:
                        self.registered.add(key)
            else:  # admitted while registrations lagged: over the share for this invocation's life
                self.gate.metrics.add(obs.SHARE_OVER)
                logger.warning("invocation %s holds %s over its tenant's share", self.owner, key)

    def _background(self, clock: Clock, first_wait: float) -> None:
        if self._stop.wait(first_wait):
            return
        while True:
            self.register(clock.now())
            if self._stop.wait(SHARE_LEASE_SECONDS / 3):
                return


class ShareGate:
    """Admits a batch's tenants into a pool's share (see the module docstring). ``tenant_slots`` maps a
    queue kind to the invocations a tenant may hold at the pool's base ceiling; ``queue_kinds`` maps a
    queue URL to its kind; a queue not in ``tenant_slots`` has no share (every record admitted, nothing
    read). With ``fair_share`` the slots follow the pool's ceiling item; without, they stay the base."""

    def __init__(
        self,
        *,
        slots: ConcurrencySlots,
        queues: RunQueue,
        tenant_slots: Mapping[str, int],
        queue_kinds: Mapping[str, str],
        clock: Clock,
        metrics: obs.MetricSink | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        process: ProcessHolds | None = None,
        register_after: float = REGISTER_AFTER_SECONDS,
        hold_seconds: float = HOLD_SECONDS,
        poll_seconds: float = POLL_SECONDS,
        fair_share: float | None = None,
        pools: PoolReadings | None = None,
        scope: str = "",
    ):
        self.slots = slots
        self.queues = queues
        self.tenant_slots = dict(tenant_slots)
        self.queue_kinds = dict(queue_kinds)
        self.clock = clock
        self.metrics = metrics or obs.NullSink()
        self.sleep = sleep
        self.monotonic = monotonic
        self.process = process if process is not None else PROCESS_HOLDS
        self.register_after = register_after
        self.hold_seconds = hold_seconds
        self.poll_seconds = poll_seconds
        self.fair_share = fair_share
        #: Per share key, the slots its last look found (what a registration or renewal is limited to).
        self._slots_seen: dict[str, int] = {}
        #: The pools' ceiling items as read (the process's, or ``pools``), under ``scope`` (the Leases
        #: table: one process may serve several deployments, as tests do).
        self.pools = pools if pools is not None else PROCESS_POOLS
        self.scope = scope

    def slots_of(self, key: str) -> int:
        """The slots a tenant may hold on ``key``'s pool, as the gate's last look found them."""
        seen = self._slots_seen.get(key)
        return seen if seen is not None else self.tenant_slots[key.split("#", 2)[1]]

    def _look(self, key: str, now_ms: int) -> tuple[set[str], int]:
        """The tenant's live registered holders and its slots now: one read -- the share item alone, or
        with the pool's ceiling item in one ``BatchGetItem`` when this process has not read that item
        for :data:`CEILING_FRESH_SECONDS`."""
        queue = key.split("#", 2)[1]
        base = self.tenant_slots[queue]
        if self.fair_share is None:
            return live(self.slots.peek(key), now_ms), base
        fresh, pool = self.pools.fresh(self.scope, queue, self.monotonic())
        if fresh:
            holders = self.slots.peek(key)
        else:
            holders, pool = self.slots.look(key, queue)
            self.pools.note(self.scope, queue, self.monotonic(), pool)
        slots = tenant_slots_at(base, self.fair_share, pool.in_force(now_ms) if pool else None)
        self._slots_seen[key] = slots
        return live(holders, now_ms), slots

    def enter(self, deliveries: Sequence[Delivery], owner: str) -> Share:
        """Decide the batch ``deliveries`` of invocation ``owner`` whole: :meth:`begin`, then the hold
        (:meth:`Share.settle`). A :class:`Share` whose ``admitted`` records are to be handled now, and
        whose :meth:`Share.exit` is called when they are."""
        share = self.begin(deliveries, owner)
        share.settle()
        return share

    def begin(self, deliveries: Sequence[Delivery], owner: str) -> Share:
        """The first look of every tenant of the batch ``deliveries`` (one read each): a tenant under
        its slots is admitted (``admitted``: to handle at once), one at its slots waits
        (``waiting``) for :meth:`Share.settle` -- which :meth:`Share.run` does beside the admitted
        records, so they never wait out another tenant's hold."""
        share = Share(gate=self, owner=owner, admitted=[])
        by_key: dict[str, list[Delivery]] = {}
        for delivery in deliveries:
            key = self._key_of(delivery)
            if key is None:
                share.admitted.append(delivery)
            else:
                by_key.setdefault(key, []).append(delivery)
        share.hold_until = self.monotonic() + self.hold_seconds
        soon = False
        for key, records in by_key.items():
            with obs.request_lane(tenant_of(key)):  # the tenant's own requests (usage, emulator lanes)
                admitted, eager = self._first_look(key, owner)
            if admitted:
                share.keys.append(key)
                share.admitted.extend(records)
                soon = soon or eager
            else:
                share.waiting[key] = records
        if share.keys:
            registered_now = self.register_after <= 0
            if registered_now:
                share.register(self.clock.now())
            # from half its slots a tenant's invocation registers at once, beside its runs
            eager_wait = 0.0 if soon else self.register_after
            self._background(share, SHARE_LEASE_SECONDS / 3 if registered_now else eager_wait)
        return share

    def settle(self, share: Share) -> list[Delivery]:
        """Hold ``share``'s waiting tenants until ``share.hold_until``, looking again every
        ``poll_seconds``: a tenant whose slot freed meanwhile takes it with its registration (a
        conditional write), before its records are handled; at the end of the hold the others are
        refused. Returns the records admitted (added to ``share.admitted`` too)."""
        with share._lock:
            waiting, share.waiting = dict(share.waiting), {}
        late: list[Delivery] = []
        while waiting and self.monotonic() < share.hold_until:
            self.sleep(self.poll_seconds)
            for key in list(waiting):
                with obs.request_lane(tenant_of(key)):
                    taken = self._take_freed(key, share.owner)
                if taken:
                    records = waiting.pop(key)
                    with share._lock:
                        share.keys.append(key)
                        share.registered.add(key)
                        share.admitted.extend(records)
                    late.extend(records)
        for key, records in waiting.items():
            with obs.request_lane(tenant_of(key)):
                self._refuse(share, records)
        if late and share._thread is None:  # no admitted-at-once hold renews it: one for these
            self._background(share, SHARE_LEASE_SECONDS / 3)
        return late

    def _background(self, share: Share, first_wait: float) -> None:
        """Start ``share``'s registration and renewal thread, in the invocation's context: its writes
        are the function's (and in the tenant's lane), as the record threads' are."""
        share._thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(share._background, self.clock, first_wait),
            name=f"share-{share.owner}",
            daemon=True,
        )
        share._thread.start()

    def _key_of(self, delivery: Delivery) -> str | None:
        queue = self.queue_kinds.get(delivery.queue_url or "")
        if queue is None or queue not in self.tenant_slots:
            return None
        try:
            body = json.loads(delivery.body)
        except ValueError:
            return None
        tenant = body.get("tenant") if isinstance(body, dict) else None
        if not isinstance(tenant, str) or not tenant or "run_id" not in body:
            return None
        return share_key(queue, tenant)

    def _first_look(self, key: str, owner: str) -> tuple[bool, bool]:
        """(admitted, register at once): the tenant is admitted when it holds fewer than its slots;
        its invocation then registers beside its runs (at once from half its slots, else if still
        running after ``register_after``)."""
        registered, slots = self._look(key, epoch_ms(self.clock.now()))
        if not self.process.take_if_under(key, owner, registered, slots):
            return False, False
        return True, self.process.count(key, registered, owner) * 2 >= slots

    def _take_freed(self, key: str, owner: str) -> bool:
        """A held tenant's look again: when it holds fewer than its slots now, the registration (a
        conditional write) takes the freed slot, before its runs start."""
        now = self.clock.now()
        registered, slots = self._look(key, epoch_ms(now))
        if not self.process.take_if_under(key, owner, registered, slots):
            return False
        if self.slots.acquire(key, owner, slots, now, SHARE_LEASE_SECONDS) is None:
            self.metrics.add(obs.SHARE_HELD)
            return True
        self.process.discard(key, owner)  # another invocation took the last slot meanwhile
        return False

    def _refuse(self, share: Share, records: list[Delivery]) -> None:
        """Leave ``records`` in the queue, visible again at once: one ``ChangeMessageVisibilityBatch``
        per queue and ten records (a batch's records share a queue: one request), so the head-room
        invocation ends, and its slot frees, one request after its hold; a record received
        :data:`RESEND_AT_RECEIVE` times or more is re-sent as a fresh copy and acknowledged instead."""
        now = self.clock.now()
        visible: dict[str, list[str]] = {}
        for delivery in records:
            share.refused.append(delivery.message_id)
            self.metrics.add(obs.SHARE_REFUSED)
            if delivery.receive_count is not None and delivery.receive_count >= RESEND_AT_RECEIVE:
                try:
                    self.queues.send_one(RunMessage.from_json(delivery.body), now)
                    continue  # the fresh copy is in the queue: this one is acknowledged
                except Exception:
                    logger.exception("re-sending refused message %s failed", delivery.message_id)
            if delivery.queue_url and delivery.receipt_handle:
                visible.setdefault(delivery.queue_url, []).append(delivery.receipt_handle)
            share.deferred.append(delivery.message_id)
        for queue_url, receipts in visible.items():
            # a handle SQS refused (logged): its message keeps its visibility timeout and comes back then
            self.queues.set_visibility_batch(queue_url, receipts, 0)


def no_share(deliveries: Sequence[Delivery], owner: str = "") -> Share:
    """Every record admitted, nothing held: a deployment without fair shares."""
    return Share(gate=None, owner=owner, admitted=list(deliveries))
