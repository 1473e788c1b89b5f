"""`jobsched runs logs RUN_ID` end to end (issue 10 §6): a real `jobsched dev` with a handler module of
the project that logs through its own logger, and the CLI reading the run's lines back over the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobsched.cli.client import ApiClient, ApiError
from tests.local.conftest import wait_for
from tests.local.devproc import DevProcess

pytestmark = pytest.mark.slow

TENANT, TOKEN = "logs", "tok-e2e-logs"
OTHER, OTHER_TOKEN = "other", "tok-e2e-other"
HANDLERS = """
import logging
import threading

from jobsched.targets.registry import job

log = logging.getLogger("shop.orders")


@job("shop.ship")
def ship(payload, ctx):
    log.info("shipping order %s", payload["order"])
    log.warning("carrier slow for order %s", payload["order"])
    return {"shipped": payload["order"], "thread": threading.current_thread().name}
"""
RUN_KEYS = ("job_id", "run_id", "attempt", "tenant")


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevProcess, Path]]:
    """Given `jobsched dev` started in a project whose `shop_handlers` module logs, logs in a temp dir."""
    project = tmp_path_factory.mktemp("project")
    (project / "shop_handlers.py").write_text(HANDLERS)
    log_dir = project / "logs"
    process = DevProcess(
        "--no-demo",
        "--tenant",
        f"{TENANT}={TOKEN}",
        "--tenant",
        f"{OTHER}={OTHER_TOKEN}",
        "--log-dir",
        str(log_dir),
        "--container-concurrency",
        "0",  # no run of this module uses the container pool: no container worker process
        env={"JOBSCHED_HANDLER_MODULES": "shop_handlers"},
        cwd=project,
    )
    try:
        process.wait_for_line("run events", timeout=90)
        yield process, log_dir
    finally:
        try:
            process.stop(timeout=30)  # a loaded machine (the whole suite on two cores) stops slowly
        finally:
            process.kill()


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "JOBSCHED_"))}
    env.update({"JOBSCHED_URL": url, "JOBSCHED_TOKEN": TOKEN})
    return subprocess.run(
        [sys.executable, "-m", "jobsched.cli", *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_runs_logs_prints_the_handlers_own_lines_with_the_run_keys(dev) -> None:
    """Given a run of a handler that logs through `logging.getLogger("shop.orders")` in its thread,
    When it has succeeded and `jobsched runs logs RUN_ID` is run,
    Then it prints the run's lines as JSON, oldest first: the handler's two lines and the worker's
    line about the delivery, each with job_id, run_id, attempt and tenant; and the run view links
    to them."""
    process, _ = dev
    client = ApiClient(process.url, token=TOKEN)
    created = client.create_job(
        {"name": "ship", "schedule": "@yearly", "target": {"handler": "shop.ship"}, "payload": {"order": 7}}
    )
    run_id = client.trigger_job(created["id"])["id"]
    run = wait_for(lambda: (r := client.get_run(run_id))["state"] == "succeeded" and r, timeout=60)
    assert run["output"]["thread"] == "jobsched-target"  # the handler ran in the executor's thread
    assert run["logs"]["lines"] == f"/runs/{run_id}/logs" and run["logs"]["log_group"] is None
    assert f'filter run_id = "{run_id}"' in run["logs"]["insights_query"]

    def printed() -> list[dict]:
        done = _cli(process.url, "runs", "logs", run_id)
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        return lines if any(r.get("message") == "run delivery handled" for r in lines) else []

    lines = wait_for(printed, timeout=20, interval=0.5)
    expected = {"job_id": created["id"], "run_id": run_id, "attempt": 1, "tenant": TENANT}
    assert all({k: line.get(k) for k in RUN_KEYS} == expected for line in lines)
    mine = [(r["level"], r["name"], r["message"]) for r in lines if r.get("name") == "shop.orders"]
    assert mine == [
        ("INFO", "shop.orders", "shipping order 7"),
        ("WARNING", "shop.orders", "carrier slow for order 7"),
    ]
    assert [r["message"] for r in lines][-1] == "run delivery handled"


def test_another_tenants_run_logs_answer_404(dev) -> None:
    """Given a run of tenant `logs`, When tenant `other` asks for its lines, Then 404, no line."""
    process, _ = dev
    client = ApiClient(process.url, token=TOKEN)
    created = client.create_job(
        {"name": "ship2", "schedule": "@yearly", "target": {"handler": "shop.ship"}, "payload": {"order": 8}}
    )
    run_id = client.trigger_job(created["id"])["id"]
    with pytest.raises(ApiError) as refused:
        ApiClient(process.url, token=OTHER_TOKEN).get_run_logs(run_id)
    assert refused.value.status == 404
