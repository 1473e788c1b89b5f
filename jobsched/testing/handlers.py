"""The operators' records about handler versions in memory: draining marks and forced deploy-checks
(the :class:`~jobsched.ports.handlers.HandlerMarks` port; the real one is
:class:`jobsched.aws.handler_store.HandlerMarksStore`, both held to ``tests/contract``), and a
catalogue of fixed handler names for tests that need no registered functions."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.ports.handlers import kept_checks
from jobsched.targets.registry import Registered


class InMemoryHandlerMarks:
    """Draining marks and deploy-check records in a process's memory (thread-safe)."""

    def __init__(self) -> None:
        self._marks: dict[tuple[str, int], dict[str, str]] = {}
        self._checks: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def draining(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self._marks)

    def mark_draining(self, name: str, version: int, *, now: datetime, by: str) -> None:
        with self._lock:
            self._marks.setdefault((name, version), {"at": now.isoformat(), "by": by})

    def unmark_draining(self, name: str, version: int) -> bool:
        with self._lock:
            return self._marks.pop((name, version), None) is not None

    def record_deploy_check(self, record: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._checks = kept_checks([*self._checks, copy.deepcopy(record)])
        return copy.deepcopy(record)

    def deploy_checks(self) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(c) for c in reversed(self._checks)]


class StaticCatalog:
    """A :class:`~jobsched.core.handlers.HandlerCatalog` of fixed handlers, for tests that check job
    targets against names without registering functions: each name is one version (1), no contract."""

    def __init__(self, names: Iterable[str]) -> None:
        self._entries = {name: Registered(name, 1, _never_called) for name in sorted(names)}

    def lookup(self, name: str, version: int | None = None) -> Registered:
        entry = self._entries.get(name)
        if entry is None or version not in (None, 1):
            field = "target.handler" if entry is None else "target.version"
            raise ValidationError(f"handler {name!r} has no version {version}", field=field)
        return entry

    def newest_version(self, name: str) -> int | None:
        return 1 if name in self._entries else None

    def entries(self) -> list[Registered]:
        return list(self._entries.values())


def _never_called(payload: dict, ctx: Any) -> None:
    raise AssertionError("a StaticCatalog's handlers are never called")
