"""The embedded mode's start-up check: do the loaded handler modules have what the data refers to?

The embedded mode runs the functions in this process, so the handlers its workers run are the ones
registered here. At start it asks its own API, for each tenant (``GET /handlers`` with the tenant's
token: what that tenant's jobs and runs refer to), and runs the deploy guard's comparison
(:mod:`jobsched.core.deploy_guard`) against this process's registry: one warning line per handler and
version the loaded modules lack (naming the jobs and runs that refer to it), and per unpinned job
payload their newest version cannot take. It warns, it does not refuse: the embedded mode is where
one fixes the module (``jobsched deploy-check`` is the guard before a deploy).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from jobsched.core.deploy_guard import Problem, code_from, strandings
from jobsched.local.http_bridge import build_event, build_response
from jobsched.targets import registry

HANDLERS_PATH = "/handlers"


def handler_warnings(invoke: Callable[[dict[str, Any]], Any], tenants: Mapping[str, str]) -> list[str]:
    """The warning lines for every tenant (``{tenant: token}``), asking the API function ``invoke``.

    A tenant whose answer is not a ``GET /handlers`` document (an API without the route, a stand-in
    function in a test) is skipped."""
    lines = []
    for tenant, token in tenants.items():
        listing = _handlers_of(invoke, token)
        if listing is None:
            continue
        # Asked after the API answered: answering loaded its handler modules (the workers' too).
        code = code_from(entry.describe() for entry in registry.catalogue())
        lines += [warning(tenant, problem) for problem in strandings(listing, code)]
    return lines


def warning(tenant: str, problem: Problem) -> str:
    """One line: what the loaded modules lack, for which tenant, and what refers to it."""
    if problem.kind == "payload":
        return f"warning: tenant {tenant}: {problem.render()}"
    what = f"handler {problem.name!r}" + ("" if problem.version is None else f" version {problem.version}")
    return (
        f"warning: {what} is not registered by the loaded handler modules; tenant {tenant} refers to it: "
        f"{problem.referred()}"
    )


def _handlers_of(invoke: Callable[[dict[str, Any]], Any], token: str) -> dict[str, Any] | None:
    event = build_event(
        method="GET",
        target=HANDLERS_PATH,
        headers=[("host", "127.0.0.1"), ("authorization", f"Bearer {token}"), ("accept", "application/json")],
        body=b"",
        source_ip="127.0.0.1",
        now=datetime.now(UTC),
        request_id=str(uuid.uuid4()),
    )
    status, _headers, body = build_response(invoke(event))
    if status != 200:
        return None
    try:
        listing = json.loads(body)
    except ValueError:
        return None
    return listing if isinstance(listing, dict) and isinstance(listing.get("handlers"), list) else None
