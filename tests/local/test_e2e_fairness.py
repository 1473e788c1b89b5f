"""End to end through the real embedded mode: one tenant's backlog does not hold up another's run.

Tenant ``noisy`` backfills 300 runs of ``demo.sleep`` (0.5 s each) onto the ``default`` queue, which
has 2 worker slots here (20 runs at a time), so the backlog takes about 10 s to drain. Tenant ``quiet`` then
triggers one run. With fair queues (the embedded mode's default, as SQS fair queues on AWS) the
quiet run starts with the next free slot, while most of the backlog is still queued; in moto's send
order (``fair_queues=False``) it starts only after all 300, about 10 s late.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, parse, run_state, runs_of

pytestmark = pytest.mark.slow

TOKENS = {"noisy": "tok-e2e-noisy", "quiet": "tok-e2e-quiet"}
BACKLOG = 300
#: The quiet run's bound: one batch's turnaround (0.5 s and moto's writes) with a margin for a loaded
#: 2-core machine; in send order the run waits for the whole backlog (about 10 s).
BOUND_SECONDS = 4.0


@pytest.fixture(scope="module")
def process() -> Iterator[EmbeddedProcess]:
    process = EmbeddedProcess(TOKENS, slots={"high": 2, "default": 2, "low": 1, "long": 1})
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def test_a_quiet_tenants_run_starts_while_another_tenants_backlog_is_queued(
    process: EmbeddedProcess,
) -> None:
    """Given tenant noisy's 300 backfilled runs of 0.5 s queued behind 2 worker slots
    When tenant quiet triggers a run
    Then it starts within 4 s of being due, while at least 100 of noisy's runs have not started."""
    noisy, quiet = process.client("noisy"), process.client("quiet")
    noisy_job = noisy.create_job(job("e2e.noisy", "@daily", "demo.sleep", payload={"seconds": 0.5}))
    quiet_job = quiet.create_job(job("e2e.quiet", "@daily", "demo.echo"))
    backfill = noisy.backfill_job(
        noisy_job["id"], start="2025-01-01T00:00:00Z", end="2025-10-27T00:00:00Z", wait=True
    )
    assert backfill["state"] == "succeeded" and backfill["created"] == BACKLOG

    run = quiet.trigger_job(quiet_job["id"])
    started = wait_for(lambda: run_state(quiet, run["id"], "running", "succeeded"), timeout=60, interval=0.2)

    # Read after the quiet run started, so what is still queued now was queued when it started.
    still_queued = [r for r in runs_of(noisy, noisy_job["id"]) if r["state"] == "queued"]
    lag = (parse(started["attempts"][0]["started_at"]) - parse(started["scheduled_at"])).total_seconds()
    assert lag < BOUND_SECONDS
    assert len(still_queued) >= 100
