"""One injection seam per Lambda function: what it builds its services from, and the services, built once.

Each ``functions/`` module creates one :class:`Seam` at import, with the function's own ``build``: a
function of the :class:`Parts` (the clock, the sleep that moves it, the settings, the clients, the meter,
the metric sink) that returns the function's services through the factories of
:mod:`jobsched.compose.pipeline` or :mod:`jobsched.compose.api`. Importing builds nothing: no client,
no settings read. The handler calls :meth:`Seam.services` on its first event (services built once per
container, under a lock, so requests that race a cold start wait for the one build) and reads the
clock from :attr:`Seam.clock`.

On AWS nothing is installed: the wall clock, ``time.sleep``, :meth:`Settings.from_env`, a new
:class:`Clients`, the factories' own meter and the function's Powertools metrics. Tests and the
benchmarks install what they need for the length of a ``with`` block::

    with worker.seam.installed(clock=clock, meter=meter):
        worker.handler(event, context)

Installing forgets the built services (the next event builds them from the new parts) and so does
leaving the block, which puts the parts back as they were. Installs nest (an inner one replaces only
the parts it names) and are undone in reverse order. A function refuses a part it does not build from
(``TypeError``), so a test cannot install a clock the function would never read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jobsched.runtime.clock import SystemClock

if TYPE_CHECKING:
    from jobsched.aws.clients import Clients
    from jobsched.aws.metering import Meter
    from jobsched.core.clock import Clock
    from jobsched.runtime.observability import MetricSink
    from jobsched.runtime.settings import Settings

S = TypeVar("S")

#: Every part a seam knows; a function names the ones it builds from (``Seam(uses=...)``).
PARTS = frozenset({"clock", "sleep", "settings", "clients", "meter", "metrics"})


@dataclass(frozen=True)
class Parts:
    """What one function builds its services from. A part left None is the deployment's own, made
    when the services are built (never at import)."""

    clock: Clock = field(default_factory=SystemClock)
    #: What a function waits on (the dispatcher's alignment of its sends, decision 0032).
    sleep: Callable[[float], Any] = time.sleep
    settings: Settings | None = None
    clients: Clients | None = None
    #: The meter every AWS call of the services goes through (None: each factory's own, fresh).
    meter: Meter | None = None
    #: Where the services' metrics go (None: the function's Powertools metrics).
    metrics: MetricSink | None = None

    def read_settings(self) -> Settings:
        """The installed settings, or the deployment's, read from the environment now."""
        if self.settings is not None:
            return self.settings
        from jobsched.runtime.settings import Settings

        return Settings.from_env()

    def metrics_or(self, own: MetricSink) -> MetricSink:
        """The installed metric sink, or the function's ``own``."""
        return self.metrics if self.metrics is not None else own

    def make_clients(self) -> Clients:
        """The installed clients, or new ones (each boto3 client created on first use)."""
        if self.clients is not None:
            return self.clients
        from jobsched.aws.clients import Clients

        return Clients()


class Seam(Generic[S]):
    """A function's parts and its services (see the module docstring)."""

    def __init__(self, name: str, build: Callable[[Parts], S], *, uses: Iterable[str]):
        uses = frozenset(uses)
        unknown = uses - PARTS
        if unknown:
            raise ValueError(f"unknown parts {sorted(unknown)}: a seam knows {sorted(PARTS)}")
        self.name = name
        self.uses = uses
        self._build = build
        self._lock = threading.RLock()
        self._parts = Parts()
        self._services: S | None = None
        self._built = False

    @property
    def parts(self) -> Parts:
        """The parts in force (the deployment's unless a ``with installed(...)`` block is open)."""
        return self._parts

    @property
    def clock(self) -> Clock:
        """The clock in force: the handler reads "now" from it."""
        return self._parts.clock

    @property
    def built(self) -> bool:
        """Whether the services in force are built (the first event came since the last install)."""
        return self._built

    def services(self) -> S:
        """The function's services, built from the parts in force on the first call, then kept."""
        with self._lock:
            if not self._built:
                self._services = self._build(self._parts)
                self._built = True
            return self._services  # type: ignore[return-value]  # built: S (None only if build returned it)

    @contextmanager
    def installed(
        self,
        *,
        clock: Clock | None = None,
        sleep: Callable[[float], Any] | None = None,
        settings: Settings | None = None,
        clients: Clients | None = None,
        meter: Meter | None = None,
        metrics: MetricSink | None = None,
        build: Callable[[Parts], S] | None = None,
    ) -> Iterator[Seam[S]]:
        """Install the parts given (the others stay as they are) and, with ``build``, another way to
        build the services from them; the services are built afresh on their next use, and again
        after the block, from the parts as they were before it."""
        given: dict[str, Any] = {
            name: value
            for name, value in (
                ("clock", clock),
                ("sleep", sleep),
                ("settings", settings),
                ("clients", clients),
                ("meter", meter),
                ("metrics", metrics),
            )
            if value is not None
        }
        unused = sorted(set(given) - self.uses)
        if unused:
            uses = ", ".join(sorted(self.uses))
            raise TypeError(f"{self.name} does not build from {', '.join(unused)} (it builds from {uses})")
        with self._lock:
            before = (self._parts, self._build)
            self._parts = replace(self._parts, **given)
            self._build = build or self._build
            self._forget()
        try:
            yield self
        finally:
            with self._lock:
                self._parts, self._build = before
                self._forget()

    def forget(self) -> None:
        """Drop the built services: the next event builds them again from the parts in force, as a new
        container would. The embedded mode calls it when it starts and stops: the deployment's parts
        read the process environment, which each embedded mode sets to its own tables and queues."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._services, self._built = None, False
