"""Deterministic interleavings of threads that share one DynamoDB, moto's or the fakes' (tests only).

moto's conditional writes are not atomic across threads, so racing real threads against it tests
moto, not our conditions. Here each thread's DynamoDB calls pass a turnstile instead: exactly one
call runs at a time, and which waiting thread goes next is drawn from a seeded random source. Every
request is atomic (as on DynamoDB), while the *order* of the requests of N racing workers varies
with the seed: each seed is one interleaving, replayable.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any


class Turnstile:
    """Lets one registered thread's DynamoDB call through at a time, in a seeded order."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.cv = threading.Condition()
        self.live: set[str] = set()
        self.waiting: set[str] = set()
        self.turn: str | None = None
        self.running: str | None = None
        self.calls = 0

    def gate(self) -> bool:
        """Called by a thread before its request: wait for its turn (False: not a raced thread)."""
        name = threading.current_thread().name
        with self.cv:
            if name not in self.live:
                return False
            self.waiting.add(name)
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.turn == name)
            self.waiting.discard(name)
            self.turn, self.running = None, name
            self.calls += 1
        return True

    def after(self) -> None:
        with self.cv:
            self.running = None
            self.cv.notify_all()

    def race(self, bodies: dict[str, Callable[[], Any]], timeout: float = 60.0) -> dict[str, Any]:
        """Run each body on its own thread, scheduling their requests; return each body's result."""
        results: dict[str, Any] = {}
        errors: list[BaseException] = []

        def wrap(name: str, body: Callable[[], Any]) -> None:
            try:
                results[name] = body()
            except BaseException as exc:  # surfaced below, in the test's thread
                errors.append(exc)
            finally:
                with self.cv:
                    self.live.discard(name)
                    self.cv.notify_all()

        threads = [threading.Thread(target=wrap, args=(n, b), name=n) for n, b in bodies.items()]
        with self.cv:
            self.live.update(bodies)
        for thread in threads:
            thread.start()
        while True:
            with self.cv:
                ready = self.cv.wait_for(
                    lambda: self.running is None and self.turn is None and self.waiting == self.live,
                    timeout=timeout,
                )
                assert ready, "a raced thread neither called DynamoDB nor finished"
                if not self.live:
                    break
                self.turn = self.rng.choice(sorted(self.waiting))
                self.cv.notify_all()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return results


class GatedClient:
    """A boto3 client (or the fakes' :class:`~jobsched.testing.wire.InMemoryDynamoClient`) whose calls
    from raced threads pass the turnstile (others go straight through)."""

    def __init__(self, client: Any, turnstile: Turnstile):
        self._client = client
        self._turnstile = turnstile
        self.exceptions = getattr(client, "exceptions", None)
        self.meta = getattr(client, "meta", None)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            gated = self._turnstile.gate()
            try:
                return method(*args, **kwargs)
            finally:
                if gated:
                    self._turnstile.after()

        return call
