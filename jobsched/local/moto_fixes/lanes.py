"""The fairness lanes: moto's server serves a few requests of one tenant at once, as AWS serves one
tenant's requests on capacity another tenant's burst does not use (decision 0033). Not a moto bug:
moto has one interpreter to share, and this shares it per tenant.

**One tenant's burst queued every other tenant's requests behind it.** moto's server handles each
request in a thread, and the threads share one interpreter: with the 200 requests of a burst's
running runs (claims, completions, the backfill's writes) in the DynamoDB process at once, a quiet
tenant's request got about a two-hundredth of the process while it was parsed, served and answered,
and waited behind a random share of them for the item lock: each of its requests took up to a second
or two (issue 13 §6: 2.5 s of a quiet run's 4 s p99 lag were its own trigger's writes). On AWS a
request does not wait for another tenant's: DynamoDB serves them on separate capacity. Now each
request names the tenant it is made for in the :data:`~jobsched.runtime.resources.LANE_HEADER` header
(set by the embedded mode's clients, :func:`jobsched.aws.clients.set_lane_source`: the run's tenant in
a worker, the caller in the API, the backfill's tenant, "" for the system's own ticks and sweeps), and
moto's server handles at most :data:`LANE_CONCURRENCY` requests of one lane at once — the whole
request, from reading its body to making its answer, under the lane's semaphore (a request without
the header, from any other client, is not held); the others of that lane wait, costing nothing. A
quiet tenant's request then shares the process with a few requests per busy tenant, not with the
burst's hundreds. A handful per lane keeps the one core moto can use busy, so a burst is not served
slower. (Tried first and measured no better: handing the item lock out in turns, and the lane's
semaphore around the operation alone — the time went in the requests' reading and answering, which
hundreds of threads shared.)

**A tenant's reads waited behind its own writes.** The fair share's first look at a batch reads each
tenant's share (one ``GetItem``) before any record of the batch runs, a quiet tenant's included
(decision 0057). When a burst's 200 runs ended at once, the bursting tenant's look waited in its lane
behind those runs' completions, 0.35–0.79 s, and the quiet run in the same batch with it. On AWS a
read is not queued behind the same tenant's writes (DynamoDB serves reads on capacity of their own,
and a `GetItem` takes milliseconds whatever that tenant writes). So a tenant's reads (``GetItem``,
``BatchGetItem``, ``Query``, ``Scan``, ``TransactGetItems``) have a lane of their own beside its
writes' (:func:`lane_of`), with as many slots.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from jobsched.runtime.resources import LANE_HEADER

_APPLIED = "_jobsched_lanes"  # on a patched method: this module's patch is in place
_LANE_ENVIRON = "HTTP_" + LANE_HEADER.upper().replace("-", "_")  # the header as WSGI names it
_TARGET_ENVIRON = "HTTP_X_AMZ_TARGET"  # DynamoDB's operation: ``DynamoDB_20120810.GetItem``
#: DynamoDB's operations that only read: a tenant's have a lane of their own, beside its writes'.
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
#: What :func:`lane_of` appends to a tenant's lane for its reads (no tenant id holds a newline).
READ_LANE_SUFFIX = "\nreads"

#: Requests of one lane (tenant) moto's DynamoDB handles at once; the rest of that lane's wait.
LANE_CONCURRENCY = 4
_LANE_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_LANE_SLOTS_LOCK = threading.Lock()


def lane_slots(lane: str) -> threading.BoundedSemaphore:
    """The slots of ``lane`` (made on first use)."""
    with _LANE_SLOTS_LOCK:
        slots = _LANE_SLOTS.get(lane)
        if slots is None:
            slots = _LANE_SLOTS[lane] = threading.BoundedSemaphore(LANE_CONCURRENCY)
        return slots


def lane_of(environ: dict[str, Any]) -> str | None:
    """The lane of a request (its WSGI ``environ``): its tenant's (the header), that tenant's read lane
    if the operation only reads, or None without the header (not the embedded mode's clients)."""
    lane = environ.get(_LANE_ENVIRON)
    if lane is None:
        return None
    operation = str(environ.get(_TARGET_ENVIRON, "")).rpartition(".")[2]
    return f"{lane}{READ_LANE_SUFFIX}" if operation in READS else str(lane)


def apply() -> None:
    """Patch moto's server (its WSGI entry) to handle at most :data:`LANE_CONCURRENCY` requests of one
    lane at once (once)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    original = DomainDispatcherApplication.__call__
    if getattr(original, _APPLIED, False):
        return

    @functools.wraps(original)
    def __call__(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        lane = lane_of(environ)
        if lane is None:  # not the embedded mode's clients: as moto
            return original(self, environ, start_response)
        with lane_slots(lane):  # the whole request: its body read, served, its answer made
            return original(self, environ, start_response)

    setattr(__call__, _APPLIED, True)
    DomainDispatcherApplication.__call__ = __call__  # type: ignore[method-assign]
