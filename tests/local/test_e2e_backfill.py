"""End to end in the embedded mode: a backfill of the documented maximum (1000 occurrences) answers
at once (202) and its runs are made in the background by the worker, each once (issue 12 §3).

Before (decision 0020), the call made every run within the request: 124 s for 1000 in ``jobsched dev``.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from jobsched.cli.client import ApiClient
from tests.local.e2e_helpers import EmbeddedProcess, job

pytestmark = pytest.mark.slow(seconds=40)

TENANT, TOKEN = "e2e-backfill", "tok-e2e-backfill"
SHARED_TENANTS = {TENANT: TOKEN}
#: The request's budget in the embedded mode (API Gateway allows 29 s on AWS).
ANSWER_SECONDS = 5.0
#: 1000 daily occurrences: 2023-01-01 .. 2025-09-26.
WINDOW = {"start": "2023-01-01T00:00:00Z", "end": "2025-09-26T00:00:00Z"}


@pytest.fixture(scope="module")
def process(shared_process: EmbeddedProcess) -> EmbeddedProcess:
    """Given the embedded mode with the real functions and this module's tenant (shared with other
    modules: tests/local/shared_embedded.py)."""
    return shared_process


def backfill_runs(client: ApiClient, job_id: str) -> list[dict]:
    runs, cursor = [], None
    while True:
        page = client.job_runs(job_id, limit=200, cursor=cursor)
        runs += [r for r in page["items"] if r["trigger"] == "backfill"]
        cursor = page["next_cursor"]
        if not cursor:
            return runs


def test_a_backfill_of_1000_answers_at_once_and_makes_every_run_once(process: EmbeddedProcess) -> None:
    client = process.client(TENANT)
    daily = client.create_job(job("e2e.backfill", "0 0 * * *", "demo.echo"))
    # When 1000 occurrences are backfilled
    started = time.monotonic()
    record = client.backfill_job(daily["id"], idempotency_key="e2e-1000", **WINDOW)
    answered = time.monotonic() - started
    # Then the API answered within the budget with a running backfill of 1000
    assert answered < ANSWER_SECONDS, answered
    assert record["planned"] == 1000 and record["state"] in ("running", "succeeded")
    # and other calls keep answering while its runs are made
    asked = time.monotonic()
    assert client.get_job(daily["id"])["id"] == daily["id"]
    assert time.monotonic() - asked < ANSWER_SECONDS
    # and the backfill reaches its end, its progress never going back
    seen: list[int] = []
    done = client.wait_backfill(
        daily["id"], record["id"], timeout=240, interval=1.0, on_progress=lambda r: seen.append(r["done"])
    )
    assert done["state"] == "succeeded", done
    assert seen == sorted(seen) and done["done"] == 1000 and done["created"] + done["existing"] == 1000
    # and every occurrence has exactly one run
    runs = backfill_runs(client, daily["id"])
    assert len(runs) == 1000 and max(Counter(r["scheduled_at"] for r in runs).values()) == 1
    # When the same request is repeated with its key, Then it names the same backfill, and adds nothing
    again = client.backfill_job(daily["id"], idempotency_key="e2e-1000", **WINDOW)
    assert again["id"] == record["id"] and again["state"] == "succeeded"
    assert len(backfill_runs(client, daily["id"])) == 1000
