"""Asynchronous backfills: a request answered at once with a record, runs made by the worker a slice
at a time (docs/decisions/0029-async-backfill.md).

:meth:`BackfillService.start` (the API, for more than
:data:`~jobsched.core.backfills.SYNC_MAX_OCCURRENCES` occurrences) stores the record and the job's
snapshot and sends one backfill message to the job's priority queue. :meth:`BackfillService.handle`
(the worker, through :class:`jobsched.services.deliveries.Deliveries`) takes the record's next slices:
for each, the runs are announced in the feed and ledger (one batch), put each with a condition on
its id's absence (eight in flight), their messages sent, and only then the slice's progress recorded,
conditionally on the record's ``done`` still being the slice's start. A delivery stops after
:data:`~jobsched.core.backfills.SLICE_BUDGET_SECONDS` and sends a message for the rest.

Exactly once: a run id derives from (job, instant) (``.b`` runs carry no nonce), so a slice decided
twice — a redelivery after a crash, a repeated request, two backfills of one range — finds the runs it
made and creates none again; runs found queued are re-sent (a duplicate delivery, claimed once). A
crash between a put and the progress write leaves the message unacknowledged: SQS delivers it again
after its visibility timeout and the slice is decided again from the record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from jobsched.aws.backfill_store import BackfillStore
from jobsched.core.backfills import (
    SLICE_BUDGET_SECONDS,
    Backfill,
    BackfillMessage,
    BackfillState,
    new_backfill_id,
)
from jobsched.core.dispatch_plan import schedule_of
from jobsched.core.errors import ConflictError, NotFoundError, ValidationError
from jobsched.core.instants import to_iso
from jobsched.core.models import Job, RunState, Trigger
from jobsched.core.run_records import new_run, outgoing_for
from jobsched.core.timeline import fires_between
from jobsched.ports.stores import RunQueue, RunRecords, SpendCap
from jobsched.runtime import observability as obs
from jobsched.services.deliveries import DEFAULT_REMAINING_SECONDS, Delivery
from jobsched.services.outcome import Outcome

logger = logging.getLogger(__name__)

#: Conditional puts in flight at once while a slice is decided (as a synchronous backfill: decision 0020).
PUT_CONCURRENCY = 8
#: Seconds of an invocation kept back: a delivery with less left hands its slices to a new message.
SAFETY_SECONDS = 15.0
_EPSILON = timedelta(milliseconds=1)


class BackfillKeyReusedError(ValidationError):
    """An ``Idempotency-Key`` already named a backfill of another range of this job."""

    code = "idempotency_key_reused"


def occurrences(job: Job, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """The instants of ``job``'s schedule in ``[start, end]``, at most ``limit + 1`` of them."""
    return [f.at for f in fires_between(schedule_of(job), start - _EPSILON, end, limit + 1)]


class BackfillService:
    def __init__(
        self,
        store: BackfillStore,
        runs: RunRecords,
        queues: RunQueue,
        *,
        budget_seconds: float = SLICE_BUDGET_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        caps: SpendCap | None = None,
    ):
        self.store = store
        self.runs = runs
        self.queues = queues
        self.budget_seconds = budget_seconds
        self.monotonic = monotonic
        #: The tenants' spend caps (decision 0062): a slice of a capped tenant's backfill is not made.
        self.caps = caps

    # --- the API's side -------------------------------------------------------------------------

    def start(
        self,
        job: Job,
        start: datetime,
        end: datetime,
        planned: int,
        now: datetime,
        idempotency_key: str | None = None,
    ) -> tuple[Backfill, bool]:
        """Record a backfill of ``planned`` occurrences of ``job`` in ``[start, end]`` and queue its
        message: ``(record, True)``. With an ``Idempotency-Key`` already used for this job: the stored
        record, ``False`` (its message is sent again while it is running, which resumes one whose
        message was lost; :class:`BackfillKeyReusedError` if that key named another range)."""
        record = Backfill(
            id=new_backfill_id(job.tenant, job.id, idempotency_key),
            job_id=job.id,
            tenant=job.tenant,
            start=start,
            end=end,
            planned=planned,
            created_at=now,
            updated_at=now,
            expires_at=self.runs.expiry_after(now),
        )
        stored, created = self.store.create(record, job)
        if not created:
            if not stored.same_request(start, end):
                raise BackfillKeyReusedError(
                    "this Idempotency-Key was used for a backfill of another range of this job; "
                    "use a new key",
                    field="Idempotency-Key",
                )
            if stored.state is not BackfillState.RUNNING:
                return stored, False
        self._send(stored, job.priority)
        return stored, created

    def get(self, tenant: str, job_id: str, backfill_id: str) -> Backfill:
        return self.store.get(tenant, job_id, backfill_id)

    def _send(self, record: Backfill, priority: str) -> None:
        body = BackfillMessage(record.tenant, record.job_id, record.id).to_json()
        try:
            self.queues.send_body(priority, body, record.tenant)
        except Exception as exc:  # any failure to queue is answered the same way
            logger.warning("backfill %s recorded, its message not queued: %s", record.id, exc)
            raise ConflictError(
                f"backfill {record.id} is recorded but could not be queued; repeat the request with the "
                "same Idempotency-Key to resume it"
            ) from exc

    # --- the worker's side ----------------------------------------------------------------------

    @staticmethod
    def accepts(body: str) -> bool:
        return BackfillMessage.accepts(body)

    def handle(
        self, delivery: Delivery, now: datetime, *, remaining_seconds: float = DEFAULT_REMAINING_SECONDS
    ) -> Outcome:
        """Take the next slices of the backfill the delivery names (see the module docstring)."""
        msg = BackfillMessage.from_json(delivery.body)
        with obs.request_lane(msg.tenant):  # its requests are its tenant's (the embedded mode's turns)
            return self._handle(msg, now, remaining_seconds)

    def _handle(self, msg: BackfillMessage, now: datetime, remaining_seconds: float) -> Outcome:
        try:
            record = self.store.get(msg.tenant, msg.job_id, msg.backfill_id)
        except NotFoundError:
            return Outcome("missing", detail={"backfill": msg.backfill_id})
        if record.state is not BackfillState.RUNNING:
            return Outcome("finished", detail={"backfill": record.id, "state": str(record.state)})
        job = self.store.job_snapshot(record.job_id, record.id)
        instants = occurrences(job, record.start, record.end, record.planned) if job is not None else []
        if job is None or len(instants) != record.planned:
            self.store.fail(record, "the backfill's job snapshot is missing or changed", to_iso(now))
            return Outcome("finished", detail={"backfill": record.id, "state": "failed"})
        started = self.monotonic()
        taken = 0
        while (bounds := record.next_slice()) is not None:
            elapsed = self.monotonic() - started
            if taken and (elapsed >= self.budget_seconds or remaining_seconds - elapsed < SAFETY_SECONDS):
                self._send(record, job.priority)  # the rest in a new delivery
                return Outcome("backfill_step", detail={"backfill": record.id, "done": record.done})
            if self.caps is not None and self.caps.capped(record.tenant, now):
                # Its tenant reached its monthly budget since the backfill was accepted: no more runs.
                reason = "stopped: the tenant is over its monthly budget (PUT /admin/tenants/{t}/budget)"
                self.store.fail(record, reason.replace("{t}", record.tenant), to_iso(now))
                return Outcome(
                    "finished", detail={"backfill": record.id, "state": "failed", "reason": "budget"}
                )
            taken += 1
            first, last = bounds
            created, existing, sent = self._decide(job, instants[first:last], now)
            after = record.after_slice(created, existing, sent, now)
            if not self.store.record(record, after):
                # Another delivery of this backfill recorded the slice first: it carries on.
                return Outcome("finished", detail={"backfill": record.id, "superseded": True})
            record = after
        return Outcome("backfill_done", detail={"backfill": record.id, "created": record.created})

    def _decide(self, job: Job, instants: list[datetime], now: datetime) -> tuple[int, int, int]:
        """Announce, put and send the runs of one slice: (created, existing, messages sent). A send
        that fails raises, so the slice is not recorded and its message comes back."""
        runs = [replace(new_run(job, at, Trigger.BACKFILL, now), due_at=now) for at in instants]
        self.runs.announce(runs)
        results = self.runs.put_announced_many(runs, concurrency=PUT_CONCURRENCY)
        outgoing = [
            outgoing_for(job, stored, now) for stored, _ in results if stored.state is RunState.QUEUED
        ]
        report = self.queues.send(outgoing)
        if report.failed:
            raise ConflictError(
                f"{len(report.failed)} backfill run message(s) not queued; the slice is retried"
            )
        created = sum(1 for _, made in results if made)
        return created, len(results) - created, len(report.sent)
