"""The registry of Python job handlers, keyed by name.

A handler is registered with ``@job("reports.nightly")`` and is called as ``handler(payload, ctx)``
where ``payload`` is the run's payload (a dict) and ``ctx`` a :class:`~jobsched.targets.context.JobContext`.
Its return value (JSON-serialisable) becomes the run's output; it raises
:class:`~jobsched.core.errors.RetryableError` or :class:`~jobsched.core.errors.PermanentError` to
classify a failure (any other exception counts as retryable).

The API checks ``is_registered`` when a job is created, so an unknown handler is a 4xx at creation,
not a dead letter later. Registration is per process: the worker imports the modules that define
handlers (``jobsched.targets.demo`` and whatever ``JOBSCHED_HANDLER_MODULES`` names).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobsched.core.errors import ConflictError, ValidationError

if TYPE_CHECKING:
    from jobsched.targets.context import JobContext

Handler = Callable[[dict, "JobContext"], Any]

_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")
_handlers: dict[str, Handler] = {}
_lock = threading.Lock()


def job(name: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler called ``name``.

    Registering the same function twice (a module imported twice) is harmless; registering a
    different function under a taken name raises :class:`ConflictError`, because two handlers
    silently shadowing each other would run the wrong code.
    """
    if not _NAME.match(name):
        raise ValidationError(
            f"handler name {name!r} is invalid: use 1-128 letters, digits, '_', '.', '-'", field="handler"
        )

    def register(fn: Handler) -> Handler:
        with _lock:
            existing = _handlers.get(name)
            if existing is not None and _identity(existing) != _identity(fn):
                raise ConflictError(f"handler {name!r} is already registered by {_identity(existing)}")
            _handlers[name] = fn
        return fn

    return register


def get_handler(name: str) -> Handler:
    """Return the handler registered as ``name``; :class:`ValidationError` (permanent) if none is."""
    try:
        return _handlers[name]
    except KeyError:
        raise ValidationError(
            f"unknown handler {name!r}; registered handlers: {', '.join(sorted(_handlers)) or 'none'}",
            field="target.handler",
        ) from None


def is_registered(name: str) -> bool:
    """True if a handler called ``name`` is registered in this process."""
    return name in _handlers


def registered_names() -> list[str]:
    """The names of all registered handlers, sorted (for error messages and the console)."""
    return sorted(_handlers)


def unregister(name: str) -> None:
    """Remove a handler (tests register throwaway handlers and clean up after themselves)."""
    with _lock:
        _handlers.pop(name, None)


def _identity(fn: Handler) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
