"""The listing benchmark (``jobsched bench --listing``): what listing by state costs after backfills.

The scenario of issue 12 §4, in-process against moto with a fixed clock: one tenant, one per-minute
job, two backfills of ``backfill`` occurrences each (the documented maximum is 1000) through the job
service, of which all but one in ``queued_every`` (100) then succeed (so 20 runs stay ``queued`` among
2000), plus one failed run (a dead letter) scheduled among them. Then, through the real API
resolver, each listing a new user tries is timed and metered (DynamoDB requests and read units, by
the metering rules of :mod:`jobsched.aws.metering`), twice: ``fresh``, right after the runs ended
(each backfill's ledger item still names its 1000 runs), and ``swept``, after one sweep of the real
sweeper 3 minutes later (past its grace: what the deployment's 5-minute sweeper does at the latest
5 minutes after), which rewrites a ledger item most of whose runs ended with only the runs still in
flight (decision 0021). ``sweep`` holds that sweep's summary.

The job's own runs queued ahead of their instant (about five at creation) are queued too, so they are
among the queued runs listed.

* ``job_queued``: the first page of ``GET /runs?job_id=<job>&state=queued``;
* ``tenant_queued``: the first page of ``GET /runs?state=queued``;
* ``failed_all``: every page of ``GET /runs?state=failed`` (what ``jobsched runs list --state failed
  --all`` does), following ``next_cursor`` to its end;
* ``dead_letters``: the first page of ``GET /dead-letters``.

Each figure (under ``fresh`` and ``swept``): ``items`` returned, ``pages`` read,
``dynamodb_requests``, ``rru``, ``seconds`` (wall time, mostly moto's in-process emulation: a relative
figure, not an AWS latency) and whether the last
page still had a ``next_cursor``. Uses only API and service calls, so the same file measures an
older version of the code too (the "before" figures of docs/performance.md; there, ``sweep`` lacks
``compacted``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

TENANT, TOKEN = "bench", "tok-bench"
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class ListingConfig:
    backfill: int = 1000  # occurrences per backfill (two backfills)
    queued_every: int = 100  # one backfilled run in this many is still queued, the others succeeded
    limit: int = 50


def run_listing(config: ListingConfig = ListingConfig()) -> dict[str, Any]:
    """Build the scenario, run the four listings, return their figures."""
    import jobsched.targets.demo  # noqa: F401 - registers demo.echo
    from jobsched.api.app import build_app
    from jobsched.api.auth import AuthConfig, Authenticator
    from jobsched.aws.clients import Clients
    from jobsched.bench.environment import bench_environment
    from jobsched.compose.api import build_services
    from jobsched.core.clock import FakeClock
    from jobsched.core.models import RunState, Trigger
    from jobsched.core.run_records import new_run
    from jobsched.runtime.settings import Settings

    clock = FakeClock(T0)
    with bench_environment(4, clock) as (_clients, _provisioned):
        services = build_services(Settings.from_env(), Clients(), clock)
        auth = AuthConfig.from_env(
            {"JOBSCHED_AUTH_MODE": "token", "JOBSCHED_TENANT_TOKENS": json.dumps({TOKEN: TENANT})}
        )
        app = build_app(services, Authenticator(auth, services.principals))
        assert services.jobs is not None
        job = services.jobs.create(
            TENANT, {"name": "listing", "schedule": "* * * * *", "target": {"handler": "demo.echo"}}, T0
        )
        first = T0 - timedelta(days=3)
        runs = []
        for start in (first, first + timedelta(minutes=config.backfill)):
            end = start + timedelta(minutes=config.backfill - 1)
            runs += services.jobs.backfill(TENANT, job.id, start, end, T0)
        store = services.jobs.runs
        # The runs were executed, but for one in ``queued_every`` still waiting: succeeded through the
        # store's own transitions (queued -> running -> succeeded), as a worker's claim and end would.
        for i, run in enumerate(runs):
            if i % config.queued_every:
                running = store.transition(run, RunState.RUNNING, T0)
                assert running is not None
                store.transition(running, RunState.SUCCEEDED, T0)
        failed = new_run(job, first + timedelta(minutes=7, seconds=30), Trigger.BACKFILL, T0, nonce="f")
        store.create(replace(failed, state=RunState.FAILED, dead_lettered_at=T0, error="boom"))
        meter = store.dynamo.meter

        def measure(path: str, query: dict[str, str], *, follow: bool) -> dict[str, Any]:
            meter.reset()
            started = time.perf_counter()
            items, pages, cursor = 0, 0, None
            while True:
                q = {**query, "limit": str(config.limit)} | ({"cursor": cursor} if cursor else {})
                body = json.loads(app.resolve(_event(path, q), None)["body"])
                items, pages, cursor = items + len(body["items"]), pages + 1, body.get("next_cursor")
                if not follow or cursor is None:
                    break
            seconds = time.perf_counter() - started
            snapshot = meter.snapshot()["dynamodb"]
            return {
                "items": items,
                "pages": pages,
                "next_cursor_at_end": cursor is not None,
                "dynamodb_requests": snapshot["requests"],
                "rru": round(snapshot["rcu"], 1),
                "seconds": round(seconds, 3),
            }

        def listings() -> dict[str, Any]:
            return {
                "job_queued": measure("/runs", {"job_id": job.id, "state": "queued"}, follow=False),
                "tenant_queued": measure("/runs", {"state": "queued"}, follow=False),
                "failed_all": measure("/runs", {"state": "failed"}, follow=True),
                "dead_letters": measure("/dead-letters", {}, follow=False),
            }

        fresh = listings()
        from jobsched.compose.pipeline import sweeper_from_settings

        clock.advance(minutes=3)
        sweep = sweeper_from_settings(Settings.from_env(), Clients()).sweep(clock.now()).to_dict()
        swept = listings()
    queued = len(range(0, 2 * config.backfill, config.queued_every))
    head = {"backfill": config.backfill, "runs": 2 * config.backfill + 1, "backfilled_queued": queued}
    return {**head, "limit": config.limit, "fresh": fresh, "sweep": sweep, "swept": swept}


def _event(path: str, query: dict[str, str]) -> dict[str, Any]:
    from urllib.parse import urlencode

    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query),
        "queryStringParameters": query,
        "headers": {"authorization": f"Bearer {TOKEN}"},
        "requestContext": {
            "http": {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "requestId": "bench",
            "routeKey": "$default",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }


def report(figures: dict[str, Any]) -> str:
    """The readable table of :func:`run_listing`'s figures."""
    lines = [
        f"listing after two backfills of {figures['backfill']} runs ({figures['backfilled_queued']} still "
        f"queued, the others succeeded; +1 failed; the job's runs queued ahead), pages of {figures['limit']}",
        f"{'listing':<22} {'items':>6} {'pages':>6} {'requests':>9} {'RRU':>8} {'seconds':>8}  cursor at end",
    ]
    for when in ("fresh", "swept"):
        for name in ("job_queued", "tenant_queued", "failed_all", "dead_letters"):
            f = figures[when][name]
            lines.append(
                f"{when + ' ' + name:<22} {f['items']:>6} {f['pages']:>6} {f['dynamodb_requests']:>9} "
                f"{f['rru']:>8} {f['seconds']:>8}  {'yes' if f['next_cursor_at_end'] else 'no'}"
            )
    sweep = figures["sweep"]
    lines.append(
        f"the sweep in between: {sweep.get('ledger_items', 0)} ledger items read, "
        f"{sweep.get('compacted', 0)} compacted, {sweep.get('settled', 0)} settled"
    )
    return "\n".join(lines)


def main() -> int:
    """``python -m jobsched.bench.listing [--json]``."""
    import sys

    figures = run_listing()
    print(json.dumps(figures) if "--json" in sys.argv[1:] else report(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
