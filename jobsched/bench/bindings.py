"""The real functions, bound to the benchmark's fake clock and to one metering recorder each.

The dispatcher, worker and sweeper entry points (``functions.dispatcher.handler``, ...) are imported
only after the benchmark has exported the function environment (as on a cold start). What they build
their services from goes in through each function's seam (:mod:`jobsched.compose.seam`): the clock,
the sleep a dispatcher tick aligns its sends with (the clock's ``advance``), the benchmark's meter for
the function, and where the benchmark asks for them, its settings and clients (the fault battery's
clients carry its faults). Nothing in the function modules is patched; the seams put back what they
held when the ``with`` block ends.

Jobs are created through the job service (the code behind ``POST /jobs``) with a meter of their own:
creating a job is not part of the cost of a run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from jobsched.aws.clients import Clients
from jobsched.aws.metering import Meter
from jobsched.compose.pipeline import job_service_from_settings
from jobsched.core.clock import Clock
from jobsched.runtime.settings import Settings
from jobsched.services.usage import TenantMeter

Handler = Callable[[dict[str, Any], Any], Any]
BENCH_TENANT = "bench"
#: The run pipeline's functions the benchmarks invoke (the sweeper included: its cost is a cost per run).
PIPELINE = ("dispatcher", "worker", "sweeper")


@dataclass
class PipelineFunctions:
    """The Lambda handlers of the run pipeline (the sweeper included: its cost is a cost per run) and
    the meter each one's AWS calls go through."""

    dispatcher: Handler
    worker: Handler
    sweeper: Handler
    #: Per-tenant meters, as each function makes its own when none is installed (decision 0059).
    meters: dict[str, Meter] = field(default_factory=lambda: {name: TenantMeter() for name in PIPELINE})

    def meter(self, function: str) -> Meter:
        return self.meters[function]


def function_module(name: str) -> Any:
    """``functions.<name>``, imported now (after the benchmark's environment is exported)."""
    return importlib.import_module(f"functions.{name}")


@contextmanager
def bind_functions(
    clock: Clock, *, settings: Settings | None = None, clients: Callable[[], Clients] | None = None
) -> Iterator[PipelineFunctions]:
    """Import the dispatcher, worker and sweeper functions and install in each one's seam ``clock``, a
    meter of its own and, when given, ``settings`` and clients made by ``clients`` (one set per
    function, as each container builds its own); their services are built afresh on first use."""
    modules = {name: function_module(name) for name in PIPELINE}
    bound = PipelineFunctions(**{name: module.handler for name, module in modules.items()})
    sleep = getattr(clock, "advance", None)  # a tick that aligns its sends sleeps on the fake clock
    with ExitStack() as stack:
        for name, module in modules.items():
            parts: dict[str, Any] = {"clock": clock, "meter": bound.meters[name], "settings": settings}
            if name == "dispatcher":
                parts["sleep"] = sleep
            if clients is not None:
                parts["clients"] = clients()
            stack.enter_context(module.seam.installed(**parts))
        yield bound


def create_cron_jobs(
    count: int,
    *,
    schedule: str,
    handler: str,
    payload: dict[str, Any],
    now: datetime,
    deadline_seconds: int = 0,
) -> list[str]:
    """Create ``count`` jobs through the job service (ids ``bench-00000``, ...); return their ids.
    ``deadline_seconds`` > 0 gives them that deadline (decision 0058: what watching it costs)."""
    service = job_service_from_settings(Settings.from_env(), Clients(), meter=Meter())
    ids = iter(f"bench-{i:05d}" for i in range(count))
    service.id_factory = lambda: next(ids)
    spec: dict[str, Any] = {
        "name": "bench",
        "schedule": schedule,
        "target": {"handler": handler},
        "payload": payload,
    }
    if deadline_seconds:
        spec["deadline_seconds"] = deadline_seconds
    return [service.create(BENCH_TENANT, spec, now).id for _ in range(count)]
