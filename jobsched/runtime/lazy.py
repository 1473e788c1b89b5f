"""The one lazy-build idiom of the ``functions/`` entry points: build on first use, once per container.

A Lambda module must not build clients at import (the embedded mode and tests set the environment
first), and must not rebuild them per event. ``@lazy`` wraps a zero-argument builder: the first call
builds under a lock (requests that race the cold start wait for the one build), later calls return
the same object; ``cache_clear()`` forgets it (tests, a new environment).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Lazy(Generic[T]):
    """A value built by ``build`` on the first call, then kept (see the module docstring)."""

    def __init__(self, build: Callable[[], T]):
        self._build = build
        self._lock = threading.Lock()
        self._value: T | None = None
        self._built = False
        self.__doc__ = build.__doc__
        self.__name__ = getattr(build, "__name__", "lazy")

    def __call__(self) -> T:
        with self._lock:
            if not self._built:
                self._value = self._build()
                self._built = True
            return self._value  # type: ignore[return-value]  # built: T (None only if build returned it)

    def cache_clear(self) -> None:
        with self._lock:
            self._value, self._built = None, False


def lazy(build: Callable[[], T]) -> Lazy[T]:
    """Decorator form of :class:`Lazy`."""
    return Lazy(build)
