"""The tick loop: what EventBridge Scheduler does for the embedded mode.

Each :class:`Periodic` is one schedule (on AWS: one ``rate(...)`` schedule per dispatcher shard, one
for the sweeper). It runs on its own thread, fires on the boundaries of its interval (every whole
second for the dispatcher), skips ticks it overran instead of piling them up, and logs -- but
survives -- a handler that raises, as a scheduled Lambda invocation would.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class Periodic:
    """Invoke ``invoke(event)`` every ``interval`` seconds until ``stop`` is set."""

    def __init__(
        self,
        *,
        name: str,
        interval: float,
        event: dict[str, Any],
        invoke: Callable[[dict[str, Any]], Any],
        stop: threading.Event,
        clock: Callable[[], float] = time.time,
        first_delay: float | None = None,
    ):
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.name = name
        self.interval = interval
        self.event = event
        self.invoke = invoke
        self.stop_event = stop
        self.clock = clock
        self.first_delay = first_delay
        self.fired = 0
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"tick-{self.name}", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _next_delay(self) -> float:
        now = self.clock()
        boundary = (math.floor(now / self.interval) + 1) * self.interval
        return max(0.0, boundary - now)

    def _loop(self) -> None:
        delay = self._next_delay() if self.first_delay is None else self.first_delay
        while not self.stop_event.wait(delay):
            try:
                self.invoke(dict(self.event))
            except Exception:
                log.exception("scheduled invocation %s raised", self.name)
            self.fired += 1
            delay = self._next_delay()


def dispatcher_schedules(
    *,
    shards: int,
    invoke: Callable[[dict[str, Any]], Any],
    stop: threading.Event,
    interval: float = 1.0,
    clock: Callable[[], float] = time.time,
) -> list[Periodic]:
    """One schedule per shard, each invoking the dispatcher with ``{"shard": k, "shards": shards}``."""
    return [
        Periodic(
            name=f"dispatcher-{k}",
            interval=interval,
            event={"shard": k, "shards": shards},
            invoke=invoke,
            stop=stop,
            clock=clock,
        )
        for k in range(shards)
    ]
