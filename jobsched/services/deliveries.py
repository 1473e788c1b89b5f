"""One queue delivery, what handles it, and the router the worker function calls per record.

A delivery is an SQS record as the services see it (:class:`Delivery`). Three services take
deliveries from the run queues: the worker (run messages), the chunk runner
(:class:`jobsched.long_jobs.chunk_runner.ChunkRunner`, a chunked job's workflow messages ``chunk.*``)
and the backfill service (:class:`jobsched.services.backfills.BackfillService`, an asynchronous
backfill's messages). Each is a :class:`DeliveryHandler`: it says which bodies it takes
(:meth:`~DeliveryHandler.accepts`) and handles one (:meth:`~DeliveryHandler.handle`).
:class:`Deliveries` routes a delivery to the first handler that accepts it, the worker otherwise; the
worker function and the embedded mode call it per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from jobsched.ports.stores import UsageRecords
from jobsched.services.outcome import Outcome
from jobsched.services.usage import UsageRecorder

if TYPE_CHECKING:
    from jobsched.services.shares import Share, ShareGate

#: A delivery's Lambda time left when the caller does not say (SQS's longest visibility of one record).
DEFAULT_REMAINING_SECONDS = 900.0


@dataclass(frozen=True)
class Delivery:
    """One SQS record as the services see it: its id, body, receipt and the URL of its queue."""

    message_id: str
    body: str
    receipt_handle: str | None = None
    queue_url: str | None = None
    receive_count: int | None = None  # ApproximateReceiveCount

    @classmethod
    def of(cls, body: str) -> Delivery:
        """A delivery of ``body`` alone: no record id, receipt or queue (a direct call: the tests, the
        benchmarks); visibility changes are then skipped, as for any delivery without a receipt."""
        return cls(message_id="", body=body)


class DeliveryHandler(Protocol):
    """What takes deliveries from the run queues: the worker, the chunk runner, the backfill service."""

    def accepts(self, body: str) -> bool:
        """Whether a message with ``body`` is this handler's to handle."""
        ...

    def handle(
        self, delivery: Delivery, now: datetime, *, remaining_seconds: float = DEFAULT_REMAINING_SECONDS
    ) -> Outcome:
        """Handle one delivery at ``now`` with ``remaining_seconds`` of the invocation left."""
        ...


DefaultT = TypeVar("DefaultT", bound=DeliveryHandler)
HandlerT = TypeVar("HandlerT")


class Deliveries(Generic[DefaultT]):
    """Routes one queue delivery to the first of ``handlers`` that accepts its body, to ``worker``
    (the default, which takes any other message) otherwise. The worker function and the embedded mode
    call :meth:`handle` per record and :meth:`flush_usage` once per batch."""

    def __init__(
        self,
        worker: DefaultT,
        *handlers: DeliveryHandler | None,
        usage: UsageRecorder | None = None,
        usage_store: UsageRecords | None = None,
        shares: ShareGate | None = None,
    ):
        self.worker = worker
        #: Asked in order before the worker (``None``: a handler the deployment does not have).
        self.handlers: tuple[DeliveryHandler, ...] = tuple(h for h in handlers if h is not None)
        #: Usage per tenant and day counted while deliveries are handled, added by :meth:`flush_usage`.
        self.usage = usage
        self.usage_store = usage_store
        #: The fair share of the pools' invocations (decision 0057); None: no share is enforced.
        self.shares = shares

    def enter_share(self, deliveries: Sequence[Delivery], owner: str) -> Share:
        """The batch's admission into its tenants' fair shares, begun (:meth:`ShareGate.begin`): the
        records to handle at once; :meth:`Share.run` handles them beside the hold of the tenants at
        their slots, then the records that hold admits; :meth:`Share.exit` gives the holds back."""
        from jobsched.services.shares import no_share

        if self.shares is None:
            return no_share(deliveries, owner)
        return self.shares.begin(deliveries, owner)

    def accepts(self, body: str) -> bool:
        """Every body: the worker takes what no other handler does."""
        return True

    def handle(
        self, delivery: Delivery, now: datetime, *, remaining_seconds: float = DEFAULT_REMAINING_SECONDS
    ) -> Outcome:
        """The outcome of the handler ``delivery`` is routed to."""
        handler = next((h for h in self.handlers if h.accepts(delivery.body)), self.worker)
        return handler.handle(delivery, now, remaining_seconds=remaining_seconds)

    def handler_of(self, kind: type[HandlerT]) -> HandlerT | None:
        """The handler of class ``kind`` (the chunk runner, the backfill service), None when the
        deployment has none."""
        return next((h for h in self.handlers if isinstance(h, kind)), None)

    def flush_usage(self, *, seconds: float | None = None, memory_mb: int = 0) -> int:
        """Add the usage counted so far to the usage items (the worker function calls this once per
        invocation, after its batch, with the invocation's ``seconds`` at ``memory_mb``: decision
        0059); the number of items written."""
        if self.usage is None or self.usage_store is None:
            return 0
        return self.usage.flush(self.usage_store, seconds=seconds, memory_mb=memory_mb)
