"""The fault battery's container pool: container worker loops consuming the runs, one stopped with
SIGTERM mid-run and one killed with SIGKILL mid-run (scenario ``container_task_killed``).

Each simulated minute a fresh container worker (:class:`jobsched.compose.container_worker.ContainerWorker`,
a lease owner of its own, as a new ECS task) drains the runs' queue through the worker path, then stops.
In the fault window:

* **SIGTERM** (the window's first minute): the worker's handlers apply their effect and then keep
  working (:meth:`Ledger.hold`); the worker is stopped with a stop timeout of 0, so every run in
  progress is handed back (no attempt used) and its message made visible; a second worker then
  receives them and runs the same attempts, whose effect (``ctx.idempotent``) is already applied;
* **SIGKILL** (its second minute): every first attempt the worker starts dies mid-run, before its
  effect (:class:`jobsched.bench.faults.Killed` out of the handler: no hand-back, no write, the message
  left in flight); once the lease has expired a later worker takes the run over (attempt 2, the
  killed one recorded ``lost``).

The battery's jobs are on the container pool (``"pool": "container"``): the dispatcher, the worker's
retries and the sweeper's re-sends put their runs on the ``container`` queue, which the workers
consume and the Lambda worker leaves alone (:attr:`ChaosHarness.skip_queues`). The ledger judges it as
every other scenario: nothing lost, no effect twice, every run ended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from jobsched.bench.faults import Killed
from jobsched.compose.container_worker import ContainerWorker, LoopConfig, container_worker_from_settings
from jobsched.core.clock import FakeClock
from jobsched.runtime.resources import CONTAINER_KIND
from jobsched.runtime.settings import Settings

SIGTERM, SIGKILL = "sigterm", "sigkill"
#: How long (wall clock) a drain may take before it is given up (the scenario then finds runs unended).
DRAIN_SECONDS = 60.0
#: A drain is over when the queue has shown nothing visible and nothing in progress this many times.
IDLE_POLLS = 3


class ContainerPool:
    """The battery's container workers over one queue (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        clients: Callable[[], Any],
        clock: FakeClock,
        sqs: Any,
    ):
        self.settings = settings
        self.clients = clients
        self.clock = clock
        self.queue_url = settings.queue_urls[CONTAINER_KIND]
        self.sqs = sqs
        self.workers = 0
        self.handed_back = 0
        self.killed = 0  # deliveries killed mid-run (SIGKILL)

    def _worker(self, stop_timeout: float = 0.0) -> ContainerWorker:
        self.workers += 1
        loop = container_worker_from_settings(
            self.settings,
            self.clients(),
            config=LoopConfig(concurrency=10, stop_timeout_seconds=stop_timeout, wait_seconds=0),
            clock=self.clock,
            owner=f"container:chaos:{self.workers}",
        )
        return loop

    def drain(self, fault: str | None, ledger: Any) -> None:
        """One minute of the pool: a worker drains the queue and stops; under ``fault``, as described
        in the module docstring (``ledger``: :class:`jobsched.bench.chaos.Ledger`, whose ``hold`` keeps
        the handlers working after their effect until they are told to stop)."""
        if fault == SIGTERM:
            ledger.hold(True)
            try:
                first = self._worker()
                first.start()
                busy = lambda: first.in_progress > 0 and ledger.holding() == first.in_progress  # noqa: E731
                self._wait(first, until=lambda: busy() and self._visible() == 0)
                self.handed_back += len(first.stop())  # stop timeout 0: every run in progress handed back
            finally:
                ledger.hold(False)
            # moto shows a message made visible "now" only after that instant (SQS and the fake at it),
            # and the simulated clock stands still within the minute: a millisecond passes.
            self.clock.advance(seconds=0.001)
        second = self._worker()
        second.start()
        self._wait(second, until=lambda: second.in_progress == 0 and self._visible() == 0)
        second.stop()

    def kill_first_attempts(self, run_id: str, attempt: int) -> bool:
        """The ledger's ``kill_in_handler`` under SIGKILL: every first attempt dies mid-run (counted)."""
        if attempt != 1:
            return False
        self.killed += 1
        return True

    def _visible(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

    @staticmethod
    def _wait(loop: ContainerWorker, *, until: Callable[[], bool]) -> None:
        deadline = time.monotonic() + DRAIN_SECONDS
        seen = 0
        while seen < IDLE_POLLS and time.monotonic() < deadline:
            seen = seen + 1 if until() else 0
            time.sleep(0.05)


@contextmanager
def killed_threads_quiet() -> Iterator[None]:
    """A container delivery killed mid-run (:class:`Killed` out of its thread) ends that thread as a
    SIGKILL would end the task: silently. Other exceptions are reported as before."""
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not None and issubclass(args.exc_type, Killed):
            return
        previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous
