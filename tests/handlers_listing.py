"""``GET /handlers`` documents as docs/api.md gives them, for the tests of what reads them
(the deploy guard, ``jobsched deploy-check``, the embedded mode's warning at start)."""

from __future__ import annotations

from typing import Any


def entry(name: str, version: int | None, *, newest: bool = False, **counts: Any) -> dict[str, Any]:
    """One ``handlers`` (or ``missing``) entry; counts default to 0, ``job_ids``/``run_ids`` are its
    examples."""
    return {
        "name": name,
        "version": version,
        "newest": newest,
        "status": "active",
        "description": "",
        "payload_schema": None,
        "upgrades_from": [],
        "jobs": 0,
        "queued": 0,
        "running": 0,
        "retrying": 0,
        "dead_lettered": 0,
        "examples": {"jobs": counts.pop("job_ids", []), "runs": counts.pop("run_ids", [])},
        **counts,
    }


def listing(
    *handlers: dict[str, Any],
    unpinned: dict[str, dict[str, int]] | None = None,
    missing: tuple[dict[str, Any], ...] = (),
    scope: str = "all",
) -> dict[str, Any]:
    """The document: the entries of registered versions, unpinned jobs' payload versions, ``missing``."""
    return {
        "code_version": "abc1234",
        "scope": scope,
        "handlers": list(handlers),
        "unpinned_payload_versions": unpinned or {},
        "missing": list(missing),
    }
