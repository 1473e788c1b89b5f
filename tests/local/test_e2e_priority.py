"""End to end through the real embedded mode: a flood of ``low`` and ``default`` work does not delay a
``high`` run (its worker slots are its own, as the high worker's reserved concurrency is on AWS).

One tenant backfills 300 runs of ``demo.sleep`` (240 s each) onto ``low`` and 400 onto ``default``:
more than either queue's worker slots hold (``default`` 20 slots x 10 records, ``low`` 2 x 10), so both
queues have a backlog for tens of seconds. The same tenant then triggers one ``high`` run: fair queuing
between tenants plays no part, only the priority's own slots do.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from jobsched.cli.client import ApiClient
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, parse, run_state, runs_of

pytestmark = pytest.mark.slow

TOKENS = {"acme": "tok-e2e-priority"}
#: Backfilled runs (one per day from 2025-01-01) per flooded priority.
FLOOD = {"low": 300, "default": 400}
END = {"low": "2025-10-27T00:00:00Z", "default": "2026-02-04T00:00:00Z"}
#: The high run's bound: its poller's receive plus one invocation's writes, with a margin for a loaded
#: 2-core machine. Were high's slots shared with the flood, it would wait for a 240 s batch to end.
BOUND_SECONDS = 3.0


@pytest.fixture(scope="module")
def process() -> Iterator[EmbeddedProcess]:
    process = EmbeddedProcess(
        TOKENS, tick_seconds=1.0
    )  # the default worker slots: high 4, default 20, low 2, long 2
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def test_a_high_run_starts_on_time_while_low_and_default_are_flooded(process: EmbeddedProcess) -> None:
    """Given 300 queued low runs and 400 default runs of 240 s each, more than their queues' slots hold
    When the same tenant triggers a high run
    Then it starts within 3 s of being due, while most low runs and some default runs wait."""
    acme = process.client("acme")
    sleep = {"payload": {"seconds": 240}}
    flood = {
        priority: acme.create_job(
            job(f"e2e.flood-{priority}", "@daily", "demo.sleep", priority=priority, **sleep)
        )
        for priority in ("low", "default")
    }
    urgent = acme.create_job(job("e2e.urgent", "@daily", "demo.echo", priority="high"))
    for priority, flooded in flood.items():
        # Over 100 occurrences a backfill is made in the background (docs/api.md): wait for it
        record = acme.backfill_job(flooded["id"], start="2025-01-01T00:00:00Z", end=END[priority], wait=True)
        assert (record["state"], record["created"]) == ("succeeded", FLOOD[priority])
    # The flood has taken every default slot before the high run is due (counted through the in-flight
    # ledger: state=running costs what is running, not the 700 runs' history).
    wait_for(lambda: len(running_of(acme, flood["default"]["id"])) >= 150, timeout=60, interval=0.5)

    run = acme.trigger_job(urgent["id"])
    started = wait_for(lambda: run_state(acme, run["id"], "running", "succeeded"), timeout=60, interval=0.1)

    high_start = parse(started["attempts"][0]["started_at"])
    lag = (high_start - parse(started["scheduled_at"])).total_seconds()
    # What the flood was doing at that instant, from the runs' own timestamps (so however long the
    # listing takes on a loaded machine, it reads the same): started by then, or still waiting.
    counts = {p: _at(runs_of(acme, f["id"]), high_start) for p, f in flood.items()}
    print(f"high run lag {lag:.2f} s; flood at its start: {counts}")
    assert lag < BOUND_SECONDS, f"the high run started {lag:.1f} s after it was due; flood: {counts}"
    assert counts["low"]["queued"] >= 200
    assert counts["default"]["queued"] >= 50 and counts["default"]["running"] >= 150  # slots all taken


def running_of(client: ApiClient, job_id: str) -> list[dict[str, Any]]:
    return client.list_all("/runs", {"job_id": job_id, "state": "running"})


def _at(runs: list[dict[str, Any]], instant: datetime) -> dict[str, int]:
    """How many of the runs were running, and how many still waiting, at ``instant``."""
    counts = {"queued": 0, "running": 0}
    for run in runs:
        first = run["attempts"][0]["started_at"] if run["attempts"] else None
        if first is None or parse(first) > instant:
            counts["queued"] += 1
        elif (finished := run["attempts"][0]["finished_at"]) is None or parse(finished) > instant:
            counts["running"] += 1
    return counts
