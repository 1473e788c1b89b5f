"""End to end: a slow listing does not hold up the embedded mode's other requests (issue 12 §4).

Before, the api function served one request at a time (a lock around the resolver): while a listing
examined a thousand runs, ``/health`` and ``GET /jobs`` waited for it (11 s measured). Now each request
in flight has a resolver of its own (:class:`jobsched.api.app.ResolverPool`), as on AWS each request is
its own Lambda invocation.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from jobsched.cli.client import ApiClient
from tests.local.e2e_helpers import EmbeddedProcess, job

pytestmark = pytest.mark.slow

TENANT, TOKEN = "e2e", "tok-e2e-listing"
#: A /health answer within this while listings run; before, it waited for the listing in progress
#: (up to its whole duration: about 1.5 s each here, measured with the lock).
PROMPT_SECONDS = 0.75
LISTINGS = 4


@pytest.fixture(scope="module")
def process() -> Iterator[EmbeddedProcess]:
    """Given the embedded mode with the real functions and one tenant."""
    process = EmbeddedProcess(
        {TENANT: TOKEN}, slots={"high": 1, "default": 1, "low": 1, "long": 1}, tick_seconds=1.0
    )
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


# A latency bound on the wall clock (0.75 s): beside three other workers on two cores /health took
# 0.996 s once (load average 13, 2026-12-05), so it runs in make test's serial session.
@pytest.mark.serial
def test_health_answers_promptly_while_a_slow_listing_runs(process: EmbeddedProcess) -> None:
    # Given a per-minute job with a 600-occurrence backfill (a history the tenant listing filters)
    client: ApiClient = process.client(TENANT)
    minute = client.create_job(job("e2e.listing", "* * * * *", "demo.echo"))
    client.backfill_job(minute["id"], start="2026-01-01T00:00:00Z", end="2026-01-01T09:59:00Z", wait=True)
    # When listings that examine the history (a state the state_index does not hold) run, one after
    # the other...
    slow: dict[str, float] = {}

    def listing() -> None:
        started = time.monotonic()
        slow_client = process.client(TENANT)
        for _ in range(LISTINGS):
            slow_client.list_runs(state="cancelled", limit=200)
        slow["started"], slow["ended"] = started, time.monotonic()

    thread = threading.Thread(target=listing)
    thread.start()
    time.sleep(0.2)
    # ...and /health is asked meanwhile
    latencies: list[tuple[float, float]] = []
    while thread.is_alive() and len(latencies) < 100:
        asked = time.monotonic()
        with urllib.request.urlopen(f"{process.url}/health", timeout=30) as response:
            assert response.status == 200
        latencies.append((asked, time.monotonic() - asked))
        time.sleep(0.1)
    thread.join(60)
    # Then every /health asked while they ran answered promptly
    during = [took for asked, took in latencies if asked < slow["ended"]]
    assert during, f"the listing ended before /health was asked ({slow['ended'] - slow['started']:.2f} s)"
    assert max(during) < PROMPT_SECONDS, latencies
