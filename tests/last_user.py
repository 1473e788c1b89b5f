"""Stop a session-wide process once the last test that uses it is torn down (decision 0044).

A session fixture lives until the session ends, but an xdist worker runs the tests that share one in a
group and then goes on with other tests: a `jobsched dev` kept for the rest of the run costs its idle
CPU (about 4 % of a core with its emulators) on a machine the parallel run keeps busy. The fixture
registers its process here with the node ids of the tests that use it; the conftest's teardown hook
reports each test torn down, and the last one stops it (the CLI's `jobsched dev`, tests/cli/conftest.py;
the shared embedded mode, tests/local/shared_embedded.py). The fixture's own finalizer still runs at the
session's end and must find the process stopped (its stop is idempotent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


class LastUser:
    """Calls ``stop`` once every node id in ``users`` has been reported :meth:`done`, exactly once.
    With no users named it never stops early (the fixture's finalizer does, at the session's end)."""

    def __init__(self, users: Iterable[str], stop: Callable[[], None]) -> None:
        self.pending = set(users)
        self._named = bool(self.pending)
        self._stop: Callable[[], None] | None = stop if self._named else None

    def done(self, nodeid: str) -> None:
        """``nodeid`` was torn down; the last pending one stops the process."""
        self.pending.discard(nodeid)
        if not self.pending:
            self._fire()

    @property
    def stopped(self) -> bool:
        """``stop`` was called (the last user was torn down)."""
        return self._named and not self.pending

    def _fire(self) -> None:
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()
