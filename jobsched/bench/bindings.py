"""The real functions, bound to the benchmark's fake clock and to one metering recorder each.

The dispatcher and worker entry points (``functions.dispatcher.handler``, ``functions.worker.handler``)
are imported only after the benchmark has exported the function environment (as on a cold start).
The clock goes in through the injection points the modules offer: ``functions.dispatcher.reset(clock, sleep)``
and the module-level ``functions.worker.clock``. Neither module takes a meter from outside (each builds
its services with a fresh one), so while bound, the service factories they call
(``dispatcher_from_settings``, ``worker_from_settings``) are wrapped to pass the benchmark's meter;
everything is restored when the ``with`` block ends.

Jobs are created through the job service (the code behind ``POST /jobs``) with a meter of their own:
creating a job is not part of the cost of a run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any
from unittest import mock

from jobsched.aws.clients import Clients
from jobsched.aws.metering import Meter
from jobsched.compose.pipeline import job_service_from_settings
from jobsched.core.clock import Clock
from jobsched.runtime.settings import Settings

Handler = Callable[[dict[str, Any], Any], Any]
BENCH_TENANT = "bench"


@dataclass
class PipelineFunctions:
    """The Lambda handlers of the run pipeline (the sweeper included: its cost is a cost per run) and
    the meter each one's AWS calls go through."""

    dispatcher: Handler
    worker: Handler
    sweeper: Handler
    meters: dict[str, Meter] = field(
        default_factory=lambda: {"dispatcher": Meter(), "worker": Meter(), "sweeper": Meter()}
    )

    def meter(self, function: str) -> Meter:
        return self.meters[function]


@contextmanager
def bind_functions(clock: Clock) -> Iterator[PipelineFunctions]:
    """Import the dispatcher, worker and sweeper functions, give them ``clock`` and a meter each, fresh
    services."""
    dispatcher = importlib.import_module("functions.dispatcher")
    worker = importlib.import_module("functions.worker")
    sweeper = importlib.import_module("functions.sweeper")
    bound = PipelineFunctions(dispatcher=dispatcher.handler, worker=worker.handler, sweeper=sweeper.handler)
    with ExitStack() as stack:
        stack.enter_context(
            mock.patch.object(
                sweeper,
                "sweeper_from_settings",
                partial(sweeper.sweeper_from_settings, meter=bound.meters["sweeper"]),
            )
        )
        stack.enter_context(mock.patch.object(sweeper, "clock", clock))
        sweeper.sweeper.cache_clear()
        stack.callback(sweeper.sweeper.cache_clear)
        stack.enter_context(
            mock.patch.object(
                dispatcher,
                "dispatcher_from_settings",
                partial(dispatcher.dispatcher_from_settings, meter=bound.meters["dispatcher"]),
            )
        )
        stack.enter_context(
            mock.patch.object(
                worker,
                "worker_from_settings",
                partial(worker.worker_from_settings, meter=bound.meters["worker"]),
            )
        )
        stack.enter_context(mock.patch.object(worker, "clock", clock))
        # services are rebuilt for this environment on the first tick; a tick that aligns its sends
        # to the second (decision 0032) sleeps on the benchmark's clock
        dispatcher.reset(clock, getattr(clock, "advance", None))
        stack.callback(dispatcher.reset)
        worker.environment.cache_clear()  # settings and clients of an earlier environment
        stack.callback(worker.environment.cache_clear)
        yield bound


def create_cron_jobs(
    count: int, *, schedule: str, handler: str, payload: dict[str, Any], now: datetime
) -> list[str]:
    """Create ``count`` jobs through the job service (ids ``bench-00000``, ...); return their ids."""
    service = job_service_from_settings(Settings.from_env(), Clients(), meter=Meter())
    ids = iter(f"bench-{i:05d}" for i in range(count))
    service.id_factory = lambda: next(ids)
    spec = {"name": "bench", "schedule": schedule, "target": {"handler": handler}, "payload": payload}
    return [service.create(BENCH_TENANT, spec, now).id for _ in range(count)]
