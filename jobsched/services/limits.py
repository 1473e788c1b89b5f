"""The limit gate: what a run delivery passes before the worker claims it (docs/semantics/limits.md).

:meth:`LimitGate.admit` runs before the claim, so a run held back by a limit uses no attempt:

1. **rate limits** (the job's ``rate_limit`` and the tenant's runs per second): one token from each
   bucket; a booking later than a second away re-sends the message to arrive at the booked instant
   (plus up to a second of jitter) marked ``booked``, and acknowledges this delivery: the booked
   delivery starts without asking the buckets again. A booking within a second is waited out here;
2. **concurrency limits** (the job's ``concurrency`` and the tenant's ``max_running``): a slot of
   each semaphore, held as ``<run id>@<worker>`` with a lease the run's heartbeat renews (the
   :class:`Admission`), freed by :meth:`Admission.release` when the delivery ends. A full semaphore
   leaves the message in the queue, hidden until the first holder's lease ends (at most one lease),
   and registers the run as a waiter: the release that frees a slot makes the oldest waiter's
   message visible at once;
3. each wait writes ``waiting_for`` on the run (:meth:`AttemptStore.mark_waiting`), which the API and
   the CLI show; the claim clears it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from jobsched.aws.limits_store import bucket_key, semaphore_key
from jobsched.core.limits import (
    ConcurrencySpec,
    RateSpec,
    concurrency_from,
    jittered,
    rate_from,
    wait_seconds,
)
from jobsched.core.messages import RunMessage
from jobsched.ports.stores import AttemptRecords, ConcurrencySlots, RateBuckets, Refusal, RunQueue
from jobsched.runtime import observability as obs
from jobsched.runtime.resources import QUEUES_MAX_RECEIVE_COUNT
from jobsched.services.outcome import Outcome, OutcomeStatus

logger = logging.getLogger(__name__)

#: A booking this close is slept out in the worker rather than re-sent.
SLEEP_BOOKING_SECONDS = 1.0
#: A delivery received this many times (SQS's ``ApproximateReceiveCount``) that must wait again is
#: re-sent rather than hidden: one more hide would let SQS redrive it to the DLQ
#: (``maxReceiveCount`` 5), where a run that only waited for a limit would be taken for poison.
RESEND_AT_RECEIVE = QUEUES_MAX_RECEIVE_COUNT - 1
#: The name a tenant-wide limit has in ``waiting_for`` (``concurrency:@tenant``, ``rate:@tenant``).
TENANT_KEY = "@tenant"


class TenantLimitSource(Protocol):
    """Where the gate learns a tenant's own limits (:class:`jobsched.aws.tenant_limits.TenantLimits`)."""

    def effective(self, tenant: str) -> object: ...


@dataclass
class Admission:
    """The slots one delivery holds: renewed by the run's heartbeat, released when it ends. When the
    delivery may not start, ``outcome`` is the answer to give instead (and nothing is held)."""

    gate: LimitGate | None = None
    holder: str = ""
    slots: list[tuple[str, int]] = field(default_factory=list)  # (semaphore key, limit)
    outcome: Outcome | None = None

    def renew(self, now: datetime) -> None:
        """Extend every slot's lease (the heartbeat calls this beside the run's own lease)."""
        if self.gate is not None:
            for key, limit in self.slots:
                if not self.gate.semaphores.renew(key, self.holder, limit, now, self.gate.lease_seconds):
                    self.gate.metrics.add(obs.LIMIT_SLOTS_LOST)

    def release(self, now: datetime) -> None:
        """Free every slot at once, waking one waiter per slot freed. Safe to call more than once."""
        if self.gate is not None:
            slots, self.slots = self.slots, []
            self.gate.release(slots, self.holder, now)


#: The admission of a delivery that needs no limit.
def unlimited() -> Admission:
    return Admission()


class LimitGate:
    """Checks a run delivery against its job's and its tenant's limits (all collaborators injected)."""

    def __init__(
        self,
        *,
        semaphores: ConcurrencySlots,
        buckets: RateBuckets,
        tenants: TenantLimitSource,
        attempts: AttemptRecords,
        queues: RunQueue,
        lease_seconds: float,
        rng: random.Random | None = None,
        metrics: obs.MetricSink | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.semaphores = semaphores
        self.buckets = buckets
        self.tenants = tenants
        self.attempts = attempts
        self.queues = queues
        self.lease_seconds = lease_seconds
        self.rng = rng or random.Random()
        self.metrics = metrics or obs.NullSink()
        self.sleep = sleep

    # --- which limits apply ------------------------------------------------------------------------

    def _limits(
        self, msg: RunMessage
    ) -> tuple[list[tuple[str, RateSpec]], list[tuple[str, ConcurrencySpec]]]:
        tenant = self.tenants.effective(msg.tenant)
        rates: list[tuple[str, RateSpec]] = []
        slots: list[tuple[str, ConcurrencySpec]] = []
        if (rate := rate_from(msg.rate_limit or None, msg.job_id)) is not None:
            rates.append((bucket_key(msg.tenant, rate.key), rate))
        tenant_rate = getattr(tenant, "rate", None)
        if tenant_rate is not None:
            rates.append((bucket_key(msg.tenant, None), replace(tenant_rate, key=TENANT_KEY)))
        if (conc := concurrency_from(msg.concurrency or None, msg.job_id)) is not None:
            slots.append((semaphore_key(msg.tenant, conc.key), conc))
        max_running = getattr(tenant, "max_running", None)
        if max_running:
            slots.append((semaphore_key(msg.tenant, None), ConcurrencySpec(TENANT_KEY, int(max_running))))
        return rates, slots

    # --- admit -------------------------------------------------------------------------------------

    def admit(
        self,
        msg: RunMessage,
        now: datetime,
        queue_url: str | None,
        receipt: str | None,
        owner: str,
        receive_count: int | None = None,
    ) -> Admission:
        """Take what ``msg`` needs at ``now``; see the module docstring. ``receive_count`` is the
        delivery's ``ApproximateReceiveCount``: a wait at :data:`RESEND_AT_RECEIVE` or more re-sends
        the message instead of hiding it, so waiting never spends the receives that redrive a message
        to the DLQ (a waiting run is not a poison message)."""
        rates, slots = self._limits(msg)
        if not rates and not slots:
            return unlimited()
        resend = receive_count is not None and receive_count >= RESEND_AT_RECEIVE
        if rates and not msg.booked:
            waited, slept = self._take_tokens(msg, rates, now, queue_url, receipt, resend)
            if waited is not None:
                return Admission(outcome=waited)
            now += timedelta(seconds=slept)
        holder = f"{msg.run_id}@{owner}"
        # A message that will be re-sent has no receipt to wake: it comes back after its wait.
        waiter = (msg.run_id, queue_url, receipt) if queue_url and receipt and not resend else None
        held: list[tuple[str, int]] = []
        for key, spec in slots:
            refusal = self.semaphores.acquire(key, holder, spec.limit, now, self.lease_seconds, waiter=waiter)
            if refusal is None:
                held.append((key, spec.limit))
                continue
            self.release(held, holder, now)
            return Admission(
                outcome=self._wait_for_slot(msg, spec.key, refusal, now, queue_url, receipt, resend)
            )
        return Admission(gate=self, holder=holder, slots=held)

    def _take_tokens(
        self,
        msg: RunMessage,
        rates: list[tuple[str, RateSpec]],
        now: datetime,
        queue_url: str | None,
        receipt: str | None,
        resend: bool = False,
    ) -> tuple[Outcome | None, float]:
        """Take a token of every bucket: ``(None, seconds slept)`` when the run may start now (after
        sleeping out a booking under a second), else ``(outcome of the wait, 0)``: re-sent for its
        booking, or hidden a second under contention."""
        delays: list[tuple[float, RateSpec]] = []
        for key, spec in rates:
            delay = self.buckets.take(key, spec, now)
            if delay is None:  # contention kept every write from landing: look again in a second
                return self._hide(msg, f"rate:{spec.key}", 1, now, queue_url, receipt, resend), 0.0
            delays.append((delay, spec))
        delay, spec = max(delays, key=lambda d: d[0])
        if delay <= 0:
            return None, 0.0
        if delay <= SLEEP_BOOKING_SECONDS:
            self.sleep(delay)
            return None, delay
        start = now + timedelta(seconds=jittered(delay, min(1.0, 1.0 / spec.per_second), self.rng.random()))
        reason = f"rate:{spec.key}"
        state = self.attempts.mark_waiting(msg.run_id, msg.attempt, reason, now, start)
        if state == "running":  # another worker holds the run (or its lease ended): the claim decides
            return None, 0.0
        if state != "waiting":  # cancelled, finished or gone
            return Outcome(
                OutcomeStatus.FINISHED, msg.run_id, msg.attempt, detail={"waiting_for": reason}
            ), 0.0
        self.queues.send_one(replace(msg, due_at=start, booked=True), now)
        self.metrics.add(obs.LIMIT_WAITS)
        starts_in = round((start - now).total_seconds(), 3)
        detail = {"waiting_for": reason, "starts_in": starts_in}
        return Outcome(OutcomeStatus.WAITING, msg.run_id, msg.attempt, detail=detail), 0.0

    def _wait_for_slot(
        self,
        msg: RunMessage,
        key: str,
        refusal: Refusal,
        now: datetime,
        queue_url: str | None,
        receipt: str | None,
        resend: bool = False,
    ) -> Outcome:
        seconds = wait_seconds(refusal.frees_in, cap=self.lease_seconds + 1, jitter=self.rng.random())
        outcome = self._hide(msg, f"concurrency:{key}", seconds, now, queue_url, receipt, resend)
        outcome.detail["woken_by_release"] = refusal.registered
        return outcome

    def _hide(
        self,
        msg: RunMessage,
        reason: str,
        seconds: int,
        now: datetime,
        queue_url: str | None,
        receipt: str | None,
        resend: bool = False,
    ) -> Outcome:
        """Leave the message in the queue, hidden ``seconds`` (``resend``: delete it and send a fresh
        copy delayed ``seconds``, whose receive count starts again); record the wait on the run."""
        state = self.attempts.mark_waiting(
            msg.run_id, msg.attempt, reason, now, now + timedelta(seconds=seconds)
        )
        if state not in ("waiting", "running"):  # cancelled, finished or gone while it waited
            return Outcome(OutcomeStatus.FINISHED, msg.run_id, msg.attempt, detail={"waiting_for": reason})
        self.metrics.add(obs.LIMIT_WAITS)
        detail: dict[str, Any] = {"waiting_for": reason, "retry_in": seconds}
        if resend:
            self.queues.send_one(replace(msg, due_at=max(msg.due_at, now + timedelta(seconds=seconds))), now)
            return Outcome(OutcomeStatus.WAITING, msg.run_id, msg.attempt, detail={**detail, "resent": True})
        if queue_url and receipt:
            self.queues.set_visibility(queue_url, receipt, seconds)
        return Outcome(OutcomeStatus.WAITING, msg.run_id, msg.attempt, defer=True, detail=detail)

    # --- release -----------------------------------------------------------------------------------

    def release(self, slots: list[tuple[str, int]], holder: str, now: datetime) -> None:
        """Free ``slots``; for each waiter a release takes off a semaphore, make its message visible."""
        for key, _limit in slots:
            try:
                waiter = self.semaphores.release(key, holder, now)
            except Exception:  # the lease ends on its own: the slot returns then
                logger.exception("could not release %s of %s", key, holder)
                continue
            if waiter is not None:
                self.queues.set_visibility(waiter.queue_url, waiter.receipt_handle, 0)
