"""End to end through the real embedded mode: an edit reaches the runs queued ahead (decision 0030).

A */2-second ``demo.echo`` job (its output is its payload) runs with a 2 s look-ahead and a 60 s
enqueue horizon, so 15 of its runs (30 s) are queued ahead when it is edited through the HTTP API:
a payload edit must make every run after the edit execute with the new payload, and a schedule edit
must record the old schedule's runs still ahead ``skipped``/``rescheduled`` and run the new one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobsched.cli.client import ApiClient
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job, parse, runs_of

pytestmark = pytest.mark.slow

TENANT, TOKEN = "e2e", "tok-e2e-edit"
SECOND = timedelta(seconds=1)


@pytest.fixture(scope="module")
def client() -> Iterator[ApiClient]:
    process = EmbeddedProcess({TENANT: TOKEN}, enqueue_horizon_seconds=60)
    try:
        process.wait_ready()
        yield process.client(TENANT)
    finally:
        process.stop()


def _queued_ahead(client: ApiClient, job_id: str, beyond: timedelta) -> list[dict[str, Any]]:
    soon = datetime.now(UTC) + beyond
    return [r for r in runs_of(client, job_id) if r["state"] == "queued" and parse(r["scheduled_at"]) > soon]


def _edited(client: ApiClient, spec: dict[str, Any], changes: dict[str, Any]) -> tuple[str, datetime]:
    """Create the job, wait until it ran and has runs queued well beyond the look-ahead, edit it;
    returns its id and the instant the edit answered."""
    created = client.create_job(spec)
    job_id = created["id"]
    wait_for(lambda: any(r["state"] == "succeeded" for r in runs_of(client, job_id)), timeout=60)
    # Given runs queued at least 10 s ahead (the look-ahead is 2 s: these are the horizon's)
    wait_for(lambda: len(_queued_ahead(client, job_id, 10 * SECOND)) >= 3, timeout=30, interval=0.2)
    # When the job is edited through PATCH /jobs/{id}
    client.update_job(job_id, changes, version=client.get_job(job_id)["version"])
    return job_id, datetime.now(UTC)


def test_a_payload_edit_runs_every_later_run_with_the_new_payload(client):
    spec = job("e2e.edit.payload", "*/2 * * * * *", "demo.echo", payload={"v": 1})
    job_id, answered = _edited(client, spec, {"payload": {"v": 2}})

    # Then every run scheduled after the edit answered, queued ahead before it included, runs with it
    def later() -> list[dict[str, Any]] | None:
        runs = [r for r in runs_of(client, job_id) if parse(r["scheduled_at"]) > answered]
        done = [r for r in runs if r["state"] == "succeeded"]
        return runs if len(done) >= 4 else None

    runs = wait_for(later, timeout=60, interval=0.3)
    outputs = {r["scheduled_at"]: r["output"] for r in runs if r["state"] == "succeeded"}
    assert set(map(str, outputs.values())) == {str({"v": 2})}, outputs
    # And each occurrence is one run (no second run for an occurrence queued ahead)
    instants = [r["scheduled_at"] for r in runs_of(client, job_id)]
    assert len(instants) == len(set(instants))
    client.pause_job(job_id)


def test_a_schedule_edit_skips_the_old_runs_ahead_and_runs_the_new_schedule(client):
    spec = job("e2e.edit.schedule", "*/2 * * * * *", "demo.echo")
    job_id, answered = _edited(client, spec, {"schedule": "1-59/2 * * * * *"})

    # Then the old schedule's (even) seconds still ahead are skipped, reason rescheduled, and the new
    # schedule's (odd) seconds after the edit run
    def settled() -> list[dict[str, Any]] | None:
        runs = [r for r in runs_of(client, job_id) if parse(r["scheduled_at"]) > answered + SECOND]
        odd_done = [r for r in runs if parse(r["scheduled_at"]).second % 2 and r["state"] == "succeeded"]
        return runs if len(odd_done) >= 3 else None

    runs = wait_for(settled, timeout=60, interval=0.3)
    even = [r for r in runs if parse(r["scheduled_at"]).second % 2 == 0]
    odd = [r for r in runs if parse(r["scheduled_at"]).second % 2]
    assert even and {(r["state"], r["skip_reason"]) for r in even} == {("skipped", "rescheduled")}
    assert odd and {r["state"] for r in odd} <= {"succeeded", "queued", "running"}
    client.pause_job(job_id)
