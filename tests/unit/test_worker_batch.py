"""The worker's partial-batch loop (jobsched.services.worker.process_batch): which records stay."""

from __future__ import annotations

import threading

from jobsched.services.deliveries import Delivery
from jobsched.services.outcome import Outcome, OutcomeStatus
from jobsched.services.worker import process_batch


def _deliveries(*bodies: str) -> list[Delivery]:
    return [Delivery(message_id=f"m{i}", body=body) for i, body in enumerate(bodies)]


def _handle(delivery: Delivery) -> Outcome:
    if delivery.body == "boom":
        raise ValueError("malformed body")
    if delivery.body == "busy":
        return Outcome(OutcomeStatus.BUSY, defer=True)
    return Outcome(OutcomeStatus.SUCCEEDED)


def test_deferred_and_raising_records_stay_every_other_is_acknowledged():
    # Given a batch with one good record, one deferred and one whose handling raises
    batch = _deliveries("ok", "busy", "boom", "ok")
    # When it is processed one record at a time
    failed = process_batch(batch, _handle, concurrency=1)
    # Then exactly the deferred and the raising records are left in the queue, in batch order
    assert failed == ["m1", "m2"]


def test_records_run_concurrently_up_to_the_limit():
    # Given a handler that only succeeds once three records are inside it at once
    barrier = threading.Barrier(3, timeout=5)

    def meet(delivery: Delivery) -> Outcome:
        barrier.wait()
        return Outcome(OutcomeStatus.SUCCEEDED)

    # When a batch of three is processed with concurrency 3
    failed = process_batch(_deliveries("a", "b", "c"), meet, concurrency=3)
    # Then all three met inside the handler: nothing is left in the queue
    assert failed == []


def test_an_empty_batch_and_a_concurrency_below_one_are_handled():
    # Given no records, and a concurrency of 0 (read as 1)
    # Then nothing stays, and a record is still handled
    assert process_batch([], _handle, concurrency=4) == []
    assert process_batch(_deliveries("busy"), _handle, concurrency=0) == ["m0"]


def test_outcome_status_is_an_enum_equal_to_its_value():
    # Given an outcome built from a plain string
    outcome = Outcome("retrying")
    # Then its status is the enum member, which compares equal to the string
    assert outcome.status is OutcomeStatus.RETRYING
    assert outcome.status == "retrying"


def test_batches_reuse_kept_record_threads_each_record_in_a_fresh_context():
    import contextvars

    mark: contextvars.ContextVar[str | None] = contextvars.ContextVar("mark", default=None)
    seen: list[tuple[threading.Thread, str | None]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(3, timeout=5)

    def record(delivery: Delivery) -> Outcome:
        barrier.wait()  # all three at once: three threads
        with lock:
            seen.append((threading.current_thread(), mark.get()))
        mark.set(delivery.body)  # left set, as a careless record might
        return Outcome(OutcomeStatus.SUCCEEDED)

    def record_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "record"}

    # Given a caller thread that processes two batches of three, three at a time
    after_first: list[set[threading.Thread]] = []

    def two_batches() -> None:
        process_batch(_deliveries("a", "b", "c"), record, concurrency=3)
        after_first.append(record_threads())
        process_batch(_deliveries("d", "e", "f"), record, concurrency=3)

    caller = threading.Thread(target=two_batches)
    caller.start()
    caller.join(10)
    first, second = {t for t, _ in seen[:3]}, {t for t, _ in seen[3:]}
    # Then the second batch ran on threads kept from before (no thread started per batch)...
    assert len(first) == 3 and len(second) == 3 and second <= after_first[0] == record_threads()
    # ... and no record saw what a record before it on the same thread had set
    assert [m for _, m in seen] == [None] * 6
    # And two callers at once are not capped by each other (the embedded mode's slots share the threads)
    seen.clear()
    both = threading.Barrier(6, timeout=5)

    def together(delivery: Delivery) -> Outcome:
        both.wait()  # six records inside at once: three of each caller
        return Outcome(OutcomeStatus.SUCCEEDED)

    left: list[list[str]] = []
    callers = [
        threading.Thread(
            target=lambda b=b: left.append(process_batch(_deliveries(*b), together, concurrency=3))
        )
        for b in (("g", "h", "i"), ("j", "k", "l"))
    ]
    for c in callers:
        c.start()
    for c in callers:
        c.join(10)
    assert left == [[], []] and not both.broken  # a timed-out barrier would have left records queued


def test_a_kill_raised_by_a_record_reaches_the_caller_as_from_a_pool():
    from jobsched.bench.faults import Killed

    def killed(delivery: Delivery) -> Outcome:
        if delivery.body == "kill":
            raise Killed("the process died here")
        return Outcome(OutcomeStatus.SUCCEEDED)

    try:
        process_batch(_deliveries("ok", "kill", "ok"), killed, concurrency=3)
    except Killed:
        return
    raise AssertionError("the kill was swallowed: the batch would have been acknowledged")
