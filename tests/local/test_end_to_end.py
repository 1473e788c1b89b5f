"""End to end through ``jobsched dev``: the real API, dispatcher, queues, worker and DLQ consumer.

``jobsched dev`` runs as a child process (exactly what ``make run`` starts, isolated from the other
tests' moto state and cached settings); the tests drive it over HTTP with the tenant's token and
read runs back through the API. Time here is the real clock of that process: these tests are about
the whole system firing on time, so they wait (with timeouts) for runs instead of faking time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobsched.cli.client import ApiClient
from tests.local.conftest import wait_for
from tests.local.devproc import DevProcess

pytestmark = pytest.mark.slow(seconds=35)

TOKEN = "tok-e2e"
# Due instant -> start: about a second on an idle laptop (SQS delays are whole seconds, rounded up);
# the bound leaves room for a CI machine running other test processes at the same time.
MAX_LAG = timedelta(seconds=5)


@pytest.fixture(scope="module")
def dev() -> Iterator[tuple[DevProcess, ApiClient]]:
    """Given `jobsched dev --no-demo` with one tenant, and an API client holding its token."""
    # (no run of this module uses the container pool: no container worker process)
    process = DevProcess("--no-demo", "--tenant", f"e2e={TOKEN}", "--container-concurrency", "0")
    try:
        process.wait_for_line("run events", timeout=60)
        yield process, ApiClient(process.url, token=TOKEN, timeout=60)
    finally:
        process.stop()
        process.kill()


def runs_of(client: ApiClient, job_id: str) -> list[dict[str, Any]]:
    return [r for r in client.list_all("/runs", {"job_id": job_id}) if r.get("job_id") == job_id]


def parse(instant: str) -> datetime:
    return datetime.fromisoformat(instant.replace("Z", "+00:00"))


def job(name: str, schedule: str, handler: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "target": {"handler": handler}, **extra}


def test_a_per_second_cron_job_runs_every_second(dev: tuple[DevProcess, ApiClient]) -> None:
    process, client = dev
    # Given a job scheduled every second
    created = client.create_job(job("e2e.every-second", "* * * * * *", "demo.echo", payload={"n": 1}))

    # When a few seconds pass
    def last_four_succeeded() -> list[dict[str, Any]] | None:
        done = [r for r in runs_of(client, created["id"]) if r["state"] == "succeeded"]
        return sorted(done, key=lambda r: r["scheduled_at"])[-4:] if len(done) >= 4 else None

    succeeded = wait_for(last_four_succeeded, timeout=30, interval=0.5)
    client.pause_job(created["id"])
    # Then consecutive runs were scheduled one second apart, and each started at (never before) its
    # instant; the bound on the lag is generous because the test machine may be heavily loaded
    instants = [parse(r["scheduled_at"]) for r in succeeded]
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(instants))
    for run in succeeded:
        assert timedelta(0) <= parse(run["started_at"]) - parse(run["scheduled_at"]) < MAX_LAG
    # And the run-event log printed them
    process.wait_for_event("succeeded", "e2e.every-second", succeeded[0]["id"], timeout=5)


def test_a_one_off_job_fires_at_its_instant(dev: tuple[DevProcess, ApiClient]) -> None:
    _, client = dev
    # Given a one-off job a few seconds from now (the system's real clock: this is end to end)
    at = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    created = client.create_job(job("e2e.once", f"at({at:%Y-%m-%dT%H:%M:%S})", "demo.echo"))
    # When its instant passes
    run = wait_for(
        lambda: next((r for r in runs_of(client, created["id"]) if r["state"] == "succeeded"), None),
        timeout=30,
        interval=0.5,
    )
    # Then exactly one run fired, scheduled at that instant and started at (never before) it
    assert parse(run["scheduled_at"]) == at
    assert timedelta(0) <= parse(run["started_at"]) - at < MAX_LAG
    assert len(runs_of(client, created["id"])) == 1


def test_a_flaky_job_is_retried_then_succeeds(dev: tuple[DevProcess, ApiClient]) -> None:
    process, client = dev
    # Given a job whose handler fails (retryably) on its first attempt
    created = client.create_job(
        job(
            "e2e.flaky",
            "@yearly",
            "demo.flaky",
            payload={"failures": 1},
            retry={"max_attempts": 3, "base_seconds": 1, "max_seconds": 2},
        )
    )
    # When it is triggered
    client.trigger_job(created["id"])
    run = wait_for(
        lambda: next((r for r in runs_of(client, created["id"]) if r["state"] == "succeeded"), None),
        timeout=30,
        interval=0.5,
    )
    # Then it succeeded on the second attempt, the first one recorded as a retryable failure
    assert run["attempt"] == 2
    detail = client.get_run(run["id"])
    assert [a.get("outcome") for a in detail["attempts"]][:1] != ["succeeded"]
    assert len(detail["attempts"]) == 2
    # And the run-event log shows its end
    process.wait_for_event("succeeded", "e2e.flaky", run["id"], timeout=5)


def test_a_permanent_failure_is_dead_lettered_without_retries(dev: tuple[DevProcess, ApiClient]) -> None:
    process, client = dev
    # Given a job whose handler fails permanently, with retries allowed
    created = client.create_job(
        job(
            "e2e.broken",
            "@yearly",
            "demo.fail",
            payload={"kind": "permanent"},
            retry={"max_attempts": 5, "base_seconds": 1, "max_seconds": 2},
        )
    )
    # When it is triggered
    client.trigger_job(created["id"])
    run = wait_for(
        lambda: next((r for r in runs_of(client, created["id"]) if r["state"] == "failed"), None),
        timeout=30,
        interval=0.5,
    )
    # Then it failed on its first attempt and is in the dead letters
    assert run["attempt"] == 1
    assert len(client.get_run(run["id"])["attempts"]) == 1
    dead = [
        d for d in client.list_all("/dead-letters", {"job_id": created["id"]}) if d["run_id"] == run["id"]
    ]
    assert len(dead) == 1
    assert "permanent" in (dead[0]["error"] or "")
    process.wait_for_event("failed", "e2e.broken", run["id"], timeout=5)


def test_make_run_registers_the_demo_jobs_for_the_default_tenant() -> None:
    # Given `jobsched dev` as `make run` starts it: demo on, no --tenant, JOBSCHED_TOKEN set
    process = DevProcess(env={"JOBSCHED_TOKEN": "tok-default"})
    code = None
    try:
        process.wait_for_line("run events", timeout=120)  # a loaded machine: startup, then three API calls
        # Then the default tenant has that token and owns the three demo jobs
        assert any("tenant    default  token tok-default" in line for line in process.lines)
        client = ApiClient(process.url, token="tok-default", timeout=60)
        names = sorted(job["name"] for job in client.list_all("/jobs"))
        assert names == ["demo.echo", "demo.flaky", "demo.sleep"]
        # And the every-10-seconds demo.sleep runs to completion, shown in the run-event log
        process.wait_for_event("succeeded", "demo.sleep", timeout=30)
    finally:
        code, _ = process.stop()
        process.kill()
    assert code == 0
