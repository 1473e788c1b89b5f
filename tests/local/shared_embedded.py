"""One embedded mode shared by the end-to-end modules that need only its defaults (decision 0044,
sixth pass).

Each :class:`~tests.local.e2e_helpers.EmbeddedProcess` costs CPU to start (moto's server, provisioning,
the functions' imports: about 4 s) and, idle, about a tenth of a core while it runs (its 2 s ticks,
sweeper, housekeeping and long polls: 8.5 %, decision 0044, thirteenth pass). The modules that start
theirs with the default configuration -- only their tenants, tokens and administrators differ -- share
one: :func:`shared_embedded`, a session fixture, starts it with the union of their tenants.
tests/conftest.py puts every test that uses it in one xdist group (named after this file), so one worker
runs them all, one module after the other, against that one process. It is stopped as soon as the last
of them has run (the worker has other tests to run), or at the session's end.

The rule for a module that joins (each is reviewed for it: decision 0044, "Sixth pass"):

* it needs the embedded mode's defaults: no ``slots``, look-ahead, enqueue horizon, sweeper period
  or other option of its own (such a module starts its own ``EmbeddedProcess``);
* it declares its tenants in ``SHARED_TENANTS`` (tenant -> token) and its administrators, if any, in
  ``SHARED_ADMINS``: tenant names and tokens of its own, used by no other module (checked here);
* it requests :func:`shared_process` (usually through a module fixture named ``process``);
* its tests read and count only their own tenants' jobs, runs, workflows, dead letters, usage,
  budgets and limits; nothing global (every tenant's listing or usage as an administrator, queue
  depths, a count of a queue's messages, the moto server's tables): with several modules in one
  process a global count sees the others' work. An administrator sets limits and budgets only on its
  module's own tenants, and clears them before its module ends;
* at the module's end :func:`shared_process` deletes its tenants' jobs and workflows and waits until
  none of their runs is queued, running or retrying, so nothing of it runs on beside the next module.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from types import ModuleType

import pytest

from jobsched.cli.client import ApiClient
from tests.last_user import LastUser
from tests.local.e2e_helpers import EmbeddedProcess

#: The session fixture's name: the modules that use it are the ones whose tenants it starts with.
FIXTURE = "shared_embedded"
#: States of a run that is not over yet (``GET /runs?state=`` reads them from the in-flight ledger).
UNFINISHED = ("queued", "running", "retrying")
#: Seconds a module's runs get to end after its tests (a backfill's last runs, a cancelled node).
DRAIN_SECONDS = 180
#: While the shared mode runs: what stops it after the last test that uses it.
_RUNNING: list[LastUser] = []


def shared_tenants(modules: Iterable[ModuleType]) -> tuple[dict[str, str], list[str]]:
    """The union of ``modules``' ``SHARED_TENANTS`` and ``SHARED_ADMINS``. A tenant or a token
    declared by two modules, or an administrator that is not one of its module's tenants, is refused:
    each module's tests must see only their own tenants' work."""
    tokens: dict[str, str] = {}
    owner: dict[str, str] = {}
    admins: set[str] = set()
    for module in modules:
        declared = getattr(module, "SHARED_TENANTS", None)
        if not declared:
            raise pytest.UsageError(f"{module.__name__} uses {FIXTURE} but declares no SHARED_TENANTS")
        own_admins = set(getattr(module, "SHARED_ADMINS", ()))
        if not own_admins <= set(declared):
            raise pytest.UsageError(f"{module.__name__}: SHARED_ADMINS names a tenant not in SHARED_TENANTS")
        for tenant, token in declared.items():
            taken_by = owner.get(tenant) or next((owner[t] for t, k in tokens.items() if k == token), None)
            if taken_by is not None:
                raise pytest.UsageError(
                    f"{module.__name__} and {taken_by} both declare tenant {tenant!r} or its token in the "
                    f"shared embedded mode: give each module tenants and tokens of its own"
                )
            tokens[tenant], owner[tenant] = token, module.__name__
        admins |= own_admins
    return tokens, sorted(admins)


def _users(items: Iterable[pytest.Item]) -> list[pytest.Item]:
    return [item for item in items if FIXTURE in getattr(item, "fixturenames", ())]


def _modules(items: Iterable[pytest.Item]) -> list[ModuleType]:
    seen: dict[str, ModuleType] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None:
            seen.setdefault(module.__name__, module)
    return [seen[name] for name in sorted(seen)]


@pytest.fixture(scope="session")
def shared_embedded(request: pytest.FixtureRequest) -> Iterator[EmbeddedProcess]:
    """The embedded mode with the real functions and the defaults, started once for every module of
    the session that uses it, with their tenants (:func:`shared_tenants`)."""
    users = _users(request.session.items)
    tokens, admins = shared_tenants(_modules(users))
    process = EmbeddedProcess(tokens, admins=admins)
    _RUNNING.append(LastUser([item.nodeid for item in users], process.stop))
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()
        _RUNNING.clear()


def after_test(item: pytest.Item) -> None:
    """After each test's teardown (tests/local/conftest.py): once every test of the session that uses
    the shared mode has run, it is stopped (:class:`tests.last_user.LastUser`). Its tests are one xdist
    group, so the worker that runs one runs them all; a worker that runs none never started it."""
    for tracker in _RUNNING:
        tracker.done(item.nodeid)


def stopped() -> bool:
    """The shared mode was stopped after its last test: nothing of a module runs on any more."""
    return any(tracker.stopped for tracker in _RUNNING)


def _unfinished(client: ApiClient) -> list[dict]:
    return [run for state in UNFINISHED for run in client.list_all("/runs", {"state": state})]


def retire(client: ApiClient) -> None:
    """Delete the tenant's jobs and workflows (their runs queued ahead are withdrawn), then wait until
    none of its runs is queued, running or retrying."""
    for found in client.list_all("/jobs"):
        client.delete_job(found["id"], version=found["version"])
    for found in client.list_all("/workflows"):
        client.request("DELETE", f"/workflows/{found['id']}", headers={"If-Match": str(found["version"])})
    from tests.local.conftest import wait_for  # the conftest imports this module's fixtures

    wait_for(lambda: not _unfinished(client), timeout=DRAIN_SECONDS, interval=1.0)


@pytest.fixture(scope="module")
def shared_process(
    shared_embedded: EmbeddedProcess, request: pytest.FixtureRequest
) -> Iterator[EmbeddedProcess]:
    """The shared embedded mode for this module's tests; when the module is done, its tenants'
    jobs and workflows are deleted and their runs left to end (:func:`retire`)."""
    yield shared_embedded
    if stopped():  # the module's last test was the session's last user of it: nothing runs on
        return
    for tenant in request.module.SHARED_TENANTS:
        retire(shared_embedded.client(tenant))
