"""What the handler routes (``/handlers``) need from outside: the operators' records about handler
versions — draining marks and forced deploy-checks — and the references the stores hold to handlers.

:class:`jobsched.aws.handler_store.HandlerMarksStore` keeps the records in the Leases table,
:class:`jobsched.testing.handlers.InMemoryHandlerMarks` in memory (both held to
``tests/contract/test_handler_marks.py``); :class:`jobsched.aws.handler_usage.HandlerUsage` reads the
references from the Jobs and Runs tables (decision 0049).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Protocol

from jobsched.core.handlers import Reference

#: A deploy-check record's fields, as ``POST /handlers/deploy-checks`` takes them (``recorded_at`` and
#: ``recorded_by`` are added by the store's caller).
DEPLOY_CHECK_FIELDS = ("forced", "code_version", "problems")
#: Forced deploy-checks kept (the oldest is dropped beyond it).
MAX_DEPLOY_CHECKS = 100
#: One record's ``problems`` as compact JSON, at most (``POST /handlers/deploy-checks`` refuses more).
MAX_DEPLOY_CHECK_BYTES = 64 * 1024
#: The records kept, together, at most: they are one DynamoDB item, which holds at most 400 KB, so
#: beyond it the oldest records are dropped too (at least four of the largest records are kept).
MAX_DEPLOY_CHECKS_BYTES = 300 * 1024


def kept_checks(checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest of ``checks`` (oldest first) that are kept: at most :data:`MAX_DEPLOY_CHECKS`, and
    together at most :data:`MAX_DEPLOY_CHECKS_BYTES` of JSON."""
    kept = checks[-MAX_DEPLOY_CHECKS:]
    sizes = [
        len(json.dumps(c, separators=(",", ":"), ensure_ascii=False, default=str).encode()) for c in kept
    ]
    while len(kept) > 1 and sum(sizes) > MAX_DEPLOY_CHECKS_BYTES:
        kept, sizes = kept[1:], sizes[1:]
    return kept


class DrainingMarks(Protocol):
    """The versions marked draining: no new job may pin them (what a job write asks)."""

    def draining(self) -> set[tuple[str, int]]:
        """``(handler, version)`` of every version marked draining."""
        ...


class HandlerMarks(DrainingMarks, Protocol):
    """Draining marks and forced deploy-check records, written by administrators."""

    def mark_draining(self, name: str, version: int, *, now: datetime, by: str) -> None:
        """Mark ``version`` of ``name`` draining (marking it again changes nothing)."""
        ...

    def unmark_draining(self, name: str, version: int) -> bool:
        """Remove the mark; False when there was none."""
        ...

    def record_deploy_check(self, record: dict[str, Any]) -> dict[str, Any]:
        """Keep ``record`` (newest last; at most :data:`MAX_DEPLOY_CHECKS`) and return it as stored."""
        ...

    def deploy_checks(self) -> list[dict[str, Any]]:
        """The records kept, newest first."""
        ...


class HandlerReferences(Protocol):
    """What refers to handlers: jobs, runs in flight and dead letters, of one tenant or of all."""

    def references(self, tenant: str | None) -> Iterable[Reference]:
        """Every reference of ``tenant``'s (None: every tenant's) jobs and runs."""
        ...
