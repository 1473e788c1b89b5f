"""Independent evidence of what the pipeline executed, and per-function tallies of what it consumed.

:class:`Executions` is fed by the handlers registered only for the benchmark, which record
``(run_id, attempt)``, so duplicates and lost runs are counted from what actually ran, not from the
system's own counters. ``bench.summary`` (the headline) returns a small result about its payload, as a
typical job returns a status or a count; ``bench.echo`` returns its whole payload, as ``demo.echo``
does, so a 1 KB payload makes a 1 KB output stored on the run item (the variant reported beside it).

:class:`Tally` attributes the metering recorder's counters to the function (or the event source
mapping) that caused them, by taking the difference of its meter around each invocation. The harness
invokes one function at a time, so the difference is exactly that invocation's consumption.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from jobsched.aws.metering import Meter
from jobsched.core.messages import payload_size
from jobsched.targets.context import JobContext
from jobsched.targets.registry import is_registered, job

BENCH_HANDLER = "bench.echo"
SUMMARY_HANDLER = "bench.summary"
#: What the handler returns -> its name: ``summary`` (a small result) or ``echo`` (the payload itself).
HANDLERS = {"summary": SUMMARY_HANDLER, "echo": BENCH_HANDLER}


class Executions:
    """Thread-safe record of handler executions: one ``(run_id, attempt)`` per call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[str, int]] = []

    def record(self, run_id: str, attempt: int) -> None:
        with self._lock:
            self.calls.append((run_id, attempt))

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()

    def per_run(self) -> Counter[str]:
        """run id -> how many times its handler ran."""
        with self._lock:
            return Counter(run_id for run_id, _ in self.calls)

    def duplicates(self) -> int:
        """Executions beyond the first of each run (a handler ran again for a run that already ran)."""
        return sum(n - 1 for n in self.per_run().values() if n > 1)


def unsuccessful(
    expected: Iterable[str], states: Mapping[str, str], executed: Mapping[str, int]
) -> dict[str, str]:
    """The expected run ids that did not succeed: run id -> stored state, ``missing`` (no run record),
    or ``not executed`` (recorded succeeded although the handler never ran for it)."""
    out: dict[str, str] = {}
    for run_id in expected:
        state = states.get(run_id)
        if state is None:
            out[run_id] = "missing"
        elif state != "succeeded":
            out[run_id] = state
        elif not executed.get(run_id):
            out[run_id] = "not executed"
    return out


#: The process-wide record the ``bench.echo`` handler writes to.
EXECUTIONS = Executions()


def register_bench_handler(output: str = "echo") -> str:
    """Register the benchmark handlers (once per process); return the name of the one for ``output``."""
    if not is_registered(BENCH_HANDLER):

        @job(BENCH_HANDLER)
        def bench_echo(payload: dict, ctx: JobContext) -> Any:
            """Return the payload (like ``demo.echo``) and record the execution as evidence."""
            EXECUTIONS.record(ctx.run_id, ctx.attempt)
            return payload

    if not is_registered(SUMMARY_HANDLER):

        @job(SUMMARY_HANDLER)
        def bench_summary(payload: dict, ctx: JobContext) -> Any:
            """Return what a job typically returns (a status and a count), record the execution."""
            EXECUTIONS.record(ctx.run_id, ctx.attempt)
            return {"ok": True, "payload_bytes": payload_size(payload)}

    return HANDLERS[output]


@dataclass
class OperationUse:
    """Consumption of one operation (e.g. ``dynamodb.PutItem``) by one function."""

    requests: int = 0
    wru: float = 0.0
    rru: float = 0.0


@dataclass
class FunctionUse:
    """Consumption of one function: invocations, measured handler time, and its operations."""

    invocations: int = 0
    handler_seconds: float = 0.0
    durations: list[float] = field(default_factory=list)
    sqs_billed_requests: int = 0  # SQS bills per started 64 KiB of payload, so a request may count more
    operations: dict[str, OperationUse] = field(default_factory=lambda: defaultdict(OperationUse))


def _meter_state(meter: Meter) -> tuple[Counter, Counter, Counter, int, Counter, Counter]:
    return (
        Counter(meter.requests),
        Counter(meter.wcu),
        Counter(meter.rcu),
        meter.sqs_billed_requests,
        Counter(meter.wcu_by_table),
        Counter(meter.rcu_by_table),
    )


class Tally:
    """Per-function consumption, from the differences of a meter around each invocation.

    Each function may have its own meter (the functions build theirs); what a meter records while one
    invocation of ``function`` runs is that invocation's consumption, because the harness runs one
    invocation at a time.
    """

    def __init__(self) -> None:
        self.functions: dict[str, FunctionUse] = defaultdict(FunctionUse)
        #: Per table (its physical name), every function together: WRU and RRU (``requests`` unused).
        self.tables: dict[str, OperationUse] = defaultdict(OperationUse)

    @contextmanager
    def invocation(self, function: str, meter: Meter, *, lambda_invocation: bool = True) -> Iterator[None]:
        """Time the block and attribute what ``meter`` records during it to ``function``.

        ``lambda_invocation=False`` is for work that is not a Lambda invocation (the event source
        mapping's receives and deletes): its requests count, its time does not.
        """
        before = _meter_state(meter)
        started = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            self._add(function, before, _meter_state(meter), seconds if lambda_invocation else None)

    def _add(self, function: str, before: tuple, after: tuple, seconds: float | None) -> None:
        requests0, wcu0, rcu0, sqs0, table_wcu0, table_rcu0 = before
        requests1, wcu1, rcu1, sqs1, table_wcu1, table_rcu1 = after
        for table in set(table_wcu1) | set(table_rcu1):
            self.tables[table].wru += table_wcu1[table] - table_wcu0[table]
            self.tables[table].rru += table_rcu1[table] - table_rcu0[table]
        use = self.functions[function]
        if seconds is not None:
            use.invocations += 1
            use.handler_seconds += seconds
            use.durations.append(seconds)
        for name, count in (requests1 - requests0).items():
            op = use.operations[name]
            op.requests += count
            if name.startswith("dynamodb."):
                short = name.split(".", 1)[1]
                op.wru += wcu1[short] - wcu0[short]
                op.rru += rcu1[short] - rcu0[short]
        use.sqs_billed_requests += sqs1 - sqs0

    def totals(self) -> tuple[float, float, int]:
        """(WRU, RRU, billed SQS requests) over every function."""
        wru = sum(op.wru for use in self.functions.values() for op in use.operations.values())
        rru = sum(op.rru for use in self.functions.values() for op in use.operations.values())
        return wru, rru, sum(use.sqs_billed_requests for use in self.functions.values())


class ApiCalls:
    """Counts every AWS API call the process makes while active, per (function, "service.Operation").

    Independent of the metering recorder: it wraps botocore's one entry point for API calls, so a call a
    function makes on a client the meter does not wrap (e.g. a raw ``change_message_visibility``) is
    still seen. The harness sets :attr:`current` to the function being invoked; calls made while
    ``current`` is None (setup, read-back) are not counted.
    """

    def __init__(self) -> None:
        self.current: str | None = None
        self.calls: dict[str, Counter[str]] = defaultdict(Counter)
        self.seconds: dict[str, float] = defaultdict(float)  # time spent inside AWS calls (i.e. in moto)
        self._lock = threading.Lock()

    @contextmanager
    def active(self) -> Iterator[ApiCalls]:
        from botocore.client import BaseClient

        original = BaseClient._make_api_call
        tally = self

        def counted(client: Any, operation_name: str, api_params: Any) -> Any:
            function = tally.current
            if function is None:
                return original(client, operation_name, api_params)
            service = client.meta.service_model.service_name
            started = time.perf_counter()
            try:
                return original(client, operation_name, api_params)
            finally:
                with tally._lock:
                    tally.calls[function][f"{service}.{operation_name}"] += 1
                    tally.seconds[function] += time.perf_counter() - started

        BaseClient._make_api_call = counted
        try:
            yield self
        finally:
            BaseClient._make_api_call = original

    def unmetered(self, tally: Tally) -> dict[str, dict[str, int]]:
        """Per function, the calls the meter did not record (raw count minus metered requests)."""
        out: dict[str, dict[str, int]] = {}
        for function, counter in self.calls.items():
            metered = tally.functions[function].operations if function in tally.functions else {}
            missing = {
                op: n - (metered[op].requests if op in metered else 0)
                for op, n in counter.items()
                if n > (metered[op].requests if op in metered else 0)
            }
            if missing:
                out[function] = missing
        return out
