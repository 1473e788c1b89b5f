"""End to end through the real embedded mode: concurrency limits hold across the 20 worker slots of
the default queue, waiting runs show ``waiting_for`` and start as soon as a slot frees, rate limits
space the starts, and an operator's per-tenant limit holds (admin API)."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, parse, runs_of

pytestmark = pytest.mark.slow

#: acme, beta and ops (an administrator): tenants of this module's own in the embedded mode it shares
#: with other modules (tests/local/shared_embedded.py).
ACME, BETA, OPS = "limits-acme", "limits-beta", "limits-ops"
SHARED_TENANTS = {ACME: "tok-e2e-limits-acme", BETA: "tok-e2e-limits-beta", OPS: "tok-e2e-limits-ops"}
SHARED_ADMINS = [OPS]


@pytest.fixture(scope="module")
def process(shared_process: EmbeddedProcess) -> EmbeddedProcess:
    return shared_process


def intervals(runs: list[dict]) -> list[tuple[datetime, datetime]]:
    return [(parse(a["started_at"]), parse(a["finished_at"])) for r in runs for a in r["attempts"]]


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The largest number of spans that overlap at one instant (an end before a start at a tie)."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda x: (x[0], x[1]))
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def all_done(client, job_id: str, count: int) -> list[dict] | None:
    runs = runs_of(client, job_id)
    return runs if len(runs) == count and all(r["state"] == "succeeded" for r in runs) else None


def test_a_concurrency_limit_holds_across_the_worker_slots(process: EmbeddedProcess) -> None:
    """Given a job with concurrency {key db, limit 2} and 12 backfilled runs of 1 s, with 20 worker
    slots free, When they run, Then never more than 2 execute at once, some run is seen queued with
    waiting_for concurrency:db, each succeeds on its first attempt, and all are done well before 12
    waits of a lease (a release wakes the next run at once)."""
    acme = process.client(ACME)
    created = acme.create_job(
        job(
            "e2e.limited",
            "@daily",
            "demo.sleep",
            payload={"seconds": 1},
            concurrency={"key": "db", "limit": 2},
        )
    )
    started = datetime.now().astimezone()
    acme.backfill_job(created["id"], start="2025-01-01T00:00:00Z", end="2025-01-12T00:00:00Z")
    waiting = wait_for(
        lambda: [r for r in runs_of(acme, created["id"]) if r.get("waiting_for") == "concurrency:db"] or None,
        timeout=30,
        interval=0.2,
    )
    assert waiting[0]["state"] == "queued" and waiting[0]["attempt"] == 0
    runs = wait_for(lambda: all_done(acme, created["id"], 12), timeout=120, interval=0.5)
    elapsed = (datetime.now().astimezone() - started).total_seconds()
    assert most_at_once(intervals(runs)) == 2
    assert [r["attempt"] for r in runs] == [1] * 12
    assert sum(r["waits"] for r in runs) >= 10
    assert elapsed < 60


def test_a_rate_limit_spaces_the_starts(process: EmbeddedProcess) -> None:
    """Given a job with rate_limit {key api, 2 per second, burst 1} and 10 backfilled runs, When they
    run, Then the starts span at least (10 - 1) / 2 s less 10 %: no faster than the rate."""
    acme = process.client(ACME)
    created = acme.create_job(
        job("e2e.rated", "@daily", "demo.echo", rate_limit={"key": "api", "per_second": 2, "burst": 1})
    )
    acme.backfill_job(created["id"], start="2025-02-01T00:00:00Z", end="2025-02-10T00:00:00Z")
    runs = wait_for(lambda: all_done(acme, created["id"], 10), timeout=120, interval=0.5)
    starts = sorted(parse(r["attempts"][0]["started_at"]) for r in runs)
    assert (starts[-1] - starts[0]).total_seconds() >= 4.5 * 0.9
    assert any(r["waits"] for r in runs)


def test_an_operators_tenant_limit_holds(process: EmbeddedProcess) -> None:
    """Given an administrator's max_running of 1 for tenant beta (set before beta ran anything: the
    workers read a tenant's limits at most once a minute), When 4 runs of a job without limits of
    its own run, Then one executes at a time and the others waited for concurrency:@tenant."""
    ops, beta = process.client(OPS), process.client(BETA)
    assert ops.put_tenant_limits(BETA, {"max_running": 1})["max_running"] == 1
    assert beta.own_limits()["source"]["max_running"] == "tenant"
    try:
        created = beta.create_job(job("e2e.tenant", "@daily", "demo.sleep", payload={"seconds": 0.5}))
        beta.backfill_job(created["id"], start="2025-03-01T00:00:00Z", end="2025-03-04T00:00:00Z")
        runs = wait_for(lambda: all_done(beta, created["id"], 4), timeout=120, interval=0.5)
        assert most_at_once(intervals(runs)) == 1
        assert sum(r["waits"] for r in runs) >= 3
    finally:
        ops.delete_tenant_limits(BETA)
