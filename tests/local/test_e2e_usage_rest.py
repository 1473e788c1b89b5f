"""End to end through the real embedded mode (decision 0059 amended): a chunked run's Step Functions
transitions land on its tenant's usage, a container-pool run's Fargate time on its own tenant's, and
neither on the other's; an administrator sees the deployment row (the mappings' empty polls) beside
them. Bounds are generous: the machine is shared."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.core.usage import DEPLOYMENT
from tests.local.conftest import wait_for
from tests.local.e2e_helpers import EmbeddedProcess, job

pytestmark = pytest.mark.slow

TOKENS = {"acme": "tok-e2e-acme", "globex": "tok-e2e-globex", "ops": "tok-e2e-ops"}
#: Queue (a choice), Plan, Chunks (the map), three RunChunk, Complete: the execution of a 3-chunk run.
CHUNKED_TRANSITIONS = 7
SLEEP_SECONDS = 2.0


@pytest.fixture(scope="module")
def process() -> Iterator[EmbeddedProcess]:
    # The sweeper (every 5 s here, 60 s by default) adds the mappings' empty polls to the deployment row
    process = EmbeddedProcess(
        TOKENS,
        admins=["ops"],
        sweeper_seconds=5.0,
        container_concurrency=1,  # globex's run on the container pool needs the container worker
        extra_env={"JOBSCHED_HANDLER_MODULES": "jobsched.long_jobs.demo"},
    )
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def _today(client: Any) -> dict[str, Any] | None:
    day = datetime.now(UTC).date().isoformat()
    items = [d for d in client.usage(day, day)["items"] if d["day"] == day]
    return items[0] if items else None


def _succeeded(client: Any, run_id: str) -> dict | None:
    run = client.get_run(run_id)
    return run if run["state"] == "succeeded" else None


def test_a_chunked_runs_transitions_and_a_container_runs_fargate_time_are_their_tenants(process) -> None:
    acme, globex, ops = process.client("acme"), process.client("globex"), process.client("ops")
    # Given acme's chunked job of three chunks and globex's job on the container pool
    chunked = acme.create_job(
        job("e2e.usage.chunked", "@yearly", "demo.chunked_sum", payload={"chunks": 3, "item_seconds": 0.01})
    )
    container = globex.create_job(
        job(
            "e2e.usage.container",
            "@yearly",
            "demo.sleep",
            payload={"seconds": SLEEP_SECONDS},
            pool="container",
        )
    )
    # When both are triggered and succeed
    chunked_run = acme.trigger_job(chunked["id"])["id"]
    container_run = globex.trigger_job(container["id"])["id"]
    wait_for(lambda: _succeeded(acme, chunked_run), timeout=120, interval=0.5)
    wait_for(lambda: _succeeded(globex, container_run), timeout=120, interval=0.5)
    # Then acme's day counts the execution's state transitions, and no Fargate time
    mine = wait_for(
        lambda: (d := _today(acme)) and d["sfn_transitions"] >= CHUNKED_TRANSITIONS and d,
        timeout=60,
        interval=0.5,
    )
    assert mine["sfn_transitions"] == CHUNKED_TRANSITIONS
    assert mine["fargate_vcpu_seconds"] == 0 and mine["fargate_gb_seconds"] == 0
    # And globex's day counts the container task's seconds while it held the run (1 vCPU, 2 GB: the
    # stack's default task size), and no transition
    theirs = wait_for(
        lambda: (d := _today(globex)) and d["fargate_vcpu_seconds"] >= SLEEP_SECONDS and d,
        timeout=60,
        interval=0.5,
    )
    assert theirs["fargate_gb_seconds"] == pytest.approx(2 * theirs["fargate_vcpu_seconds"], rel=1e-3)
    assert theirs["sfn_transitions"] == 0
    # And each estimate prices what it counts: the transitions and the Fargate seconds at list prices
    assert mine["estimated_usd"] > CHUNKED_TRANSITIONS * 0.025 / 1000
    assert theirs["estimated_usd"] > SLEEP_SECONDS * 0.03238 / 3600
    # And an administrator sees the deployment row beside the tenants, which neither tenant sees
    day = datetime.now(UTC).date().isoformat()
    rows = wait_for(
        lambda: (r := ops.usage(day, day)["items"]) and any(d["tenant"] == DEPLOYMENT for d in r) and r,
        timeout=400,
        interval=2,
    )
    deployment = next(d for d in rows if d["tenant"] == DEPLOYMENT)
    assert deployment["sqs_requests"] > 0 and deployment["estimated_usd"] > 0
    assert {d["tenant"] for d in acme.usage(day, day)["items"]} == {"acme"}
